package mcpserve_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/mcpserve"
	"github.com/cyberos/mcpd/pkg/registry"
)

// TestGetServerAvailability: get_server carries the server's figures of
// the last 24 hours, the same as the store's (and so the API's).
func TestGetServerAvailability(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tenant := uuid.New()
	srv := e.register(t, tenant, "calendar", "search")
	e.sweep(t, 3*testInterval+time.Second) // unhealthy
	e.clock.Advance(5 * time.Minute)
	e.heartbeat(t, tenant, srv.ServerID) // recovered
	e.clock.Advance(15 * time.Minute)
	want, err := e.store.ServerAvailability(t.Context(), tenant, srv.ServerID, registry.AvailabilityRequest{Window: registry.Window24h})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Outages) != 1 || *want.AvailableRatio >= 1 {
		t.Fatalf("store figures %+v, want one outage", want)
	}

	cs, _ := e.connect(t, e.token(t, tenant, "mcp:read"), revisions[0])
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserve.ToolGetServer,
		Arguments: map[string]any{"server_id": srv.ServerID.String()}})
	if err != nil || res.IsError {
		t.Fatalf("get_server: %v %+v", err, res)
	}
	var d mcpserve.ServerDetail
	decodeStructured(t, res, &d)
	if d.Availability24h == nil || !reflect.DeepEqual(*d.Availability24h, want) {
		t.Fatalf("availability_24h %+v, want the store's %+v", d.Availability24h, want)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "available over the last 24h: 75.629% (1 outages)") {
		t.Fatalf("text %q lacks the 24 h percentage", text)
	}
}
