package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
)

// bearerTransport sets a bearer token on every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPEndpoint: mcpd serves /mcp on its listener, behind the token, on
// both revisions, and stops with a subscription open.
func TestMCPEndpoint(t *testing.T) {
	var stdout testlog.Buffer
	d := start(t, devConfig(), daemon.Options{Stdout: &stdout})
	m := tokenRE.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no token in the banner:\n%s", stdout.String())
	}
	base := "http://" + d.Addr()
	c := client.New(base, m[1])
	defer c.CloseIdleConnections()
	ctx := context.Background()
	if _, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "calendar", Version: "1.3.2",
		SupportedProtocols: []string{"2025-11-25"}, Skills: []registry.SkillInfo{{Name: "search"}}}, ""); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/mcp without a token: %d", resp.StatusCode)
	}

	hc := &http.Client{Transport: bearerTransport{token: m[1]}}
	defer hc.CloseIdleConnections()
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		cl := mcp.NewClient(&mcp.Implementation{Name: "daemon-test", Version: "1"}, nil)
		cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc},
			&mcp.ClientSessionOptions{ProtocolVersion: rev})
		if err != nil {
			t.Fatalf("%s: connect: %v", rev, err)
		}
		defer cs.Close()
		if got := cs.InitializeResult().ProtocolVersion; got != rev {
			t.Fatalf("negotiated %s, want %s", got, rev)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_skill", Arguments: map[string]any{"name": "search"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: find_skill: %v %+v", rev, err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		if !strings.Contains(string(b), `"module_name":"calendar"`) {
			t.Fatalf("%s: find_skill: %s", rev, b)
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "mcpd://skills/search"}); err != nil {
			t.Fatalf("%s: subscribe: %v", rev, err)
		}
	}
	// Stop (in the cleanup) ends the open streams within its timeout.
}
