package api_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/registry"
)

// TestAvailabilityEndpoints: the server, skill and list answers carry the
// store's figures in the contract's shape; a bad window is a 400 naming
// it; another tenant's server and skill are 404.
func TestAvailabilityEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar", "search")
	mail := b.register(t, "mail", "search")
	b.clock.Advance(35 * time.Second)
	if resp := b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+mail.ServerID.String()+`"}`); resp.code != http.StatusOK {
		t.Fatalf("heartbeat: %d %s", resp.code, resp.body)
	}
	if _, err := b.monitor.Sweep(t.Context(), b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(5 * time.Minute)
	if resp := b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+srv.ServerID.String()+`"}`); resp.code != http.StatusOK {
		t.Fatalf("heartbeat: %d %s", resp.code, resp.body)
	}
	b.clock.Advance(10 * time.Minute)
	id := srv.ServerID.String()

	resp := b.do(t, req{path: "/v1/mcp/servers/" + id + "/availability?window=1h", token: b.readTok})
	if resp.code != http.StatusOK {
		t.Fatalf("%d %s", resp.code, resp.body)
	}
	var raw map[string]any
	if err := json.Unmarshal(resp.body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"window", "from", "to", "observed_seconds", "available_ratio", "seconds", "outages", "transitions"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("answer lacks %q: %s", k, resp.body)
		}
	}
	got := decode[registry.Availability](t, resp)
	want, err := b.store.ServerAvailability(t.Context(), b.tenant, srv.ServerID, registry.AvailabilityRequest{Window: registry.Window1h})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("answer %+v, want the store's %+v", got, want)
	}
	// Registered 15m35s ago; unhealthy from 35 s to 5m35s.
	if got.ObservedSeconds != 935 || got.Seconds.Unhealthy != 300 || got.Transitions != 3 || len(got.Outages) != 1 ||
		got.Outages[0].Status != registry.StatusUnhealthy || *got.AvailableRatio != 0.67914 {
		t.Fatalf("figures %+v", got)
	}

	// The default window is 24 h.
	if d := decode[registry.Availability](t, b.get(t, "/v1/mcp/servers/"+id+"/availability")); d.Window != registry.Window24h {
		t.Fatalf("default window %q, want 24h", d.Window)
	}

	skill := decode[registry.Availability](t, b.get(t, "/v1/mcp/skills/search/availability?window=7d"))
	if skill.Window != registry.Window7d || skill.ObservedSeconds != 935 || *skill.AvailableRatio != 1 || len(skill.Outages) != 0 {
		t.Fatalf("skill with a provider up all along: %+v", skill)
	}

	// A name with a slash and spaces, escaped in the path.
	b.register(t, "paths", "team/search it")
	if a := decode[registry.Availability](t, b.get(t, "/v1/mcp/skills/team%2Fsearch%20it/availability")); a.ObservedSeconds != 0 || a.Transitions != 1 {
		t.Fatalf("skill with a slash: %+v", a)
	}

	list := decode[apiwire.AvailabilityList](t, b.get(t, "/v1/mcp/availability?window=1h&server_ids="+id+","+uuid.NewString()))
	if list.Window != registry.Window1h || len(list.Servers) != 1 || list.Servers[0].ServerID != srv.ServerID ||
		*list.Servers[0].AvailableRatio != *got.AvailableRatio || list.Servers[0].ObservedSeconds != got.ObservedSeconds {
		t.Fatalf("list %+v, want the server's figures", list)
	}

	for _, path := range []string{
		"/v1/mcp/servers/" + id + "/availability?window=2h",
		"/v1/mcp/skills/search/availability?window=1d",
		"/v1/mcp/availability?window=60m&server_ids=" + id,
	} {
		if resp := b.get(t, path); resp.code != http.StatusBadRequest || decode[map[string]any](t, resp)["field"] != "window" {
			t.Errorf("%s: %d %s, want 400 naming window", path, resp.code, resp.body)
		}
	}
	wantProblem(t, b.get(t, "/v1/mcp/availability"), http.StatusBadRequest, "server_ids")
	wantProblem(t, b.get(t, "/v1/mcp/availability?server_ids="+id+",nope"), http.StatusBadRequest, "server_ids")
	wantProblem(t, b.get(t, "/v1/mcp/servers/nope/availability"), http.StatusBadRequest, "server_id")

	other := b.issue(t, uuid.New(), "mcp:read")
	wantProblem(t, b.do(t, req{path: "/v1/mcp/servers/" + id + "/availability", token: other}), http.StatusNotFound, "")
	wantProblem(t, b.do(t, req{path: "/v1/mcp/skills/search/availability", token: other}), http.StatusNotFound, "")
	if l := decode[apiwire.AvailabilityList](t, b.do(t, req{path: "/v1/mcp/availability?server_ids=" + id, token: other})); len(l.Servers) != 0 {
		t.Fatalf("another tenant's list: %+v, want none", l)
	}
	wantProblem(t, b.do(t, req{path: "/v1/mcp/servers/" + id + "/availability", token: b.issue(t, b.tenant, "openid")}), http.StatusForbidden, "")
}
