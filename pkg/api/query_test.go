package api_test

import (
	"net/http"
	"testing"
)

// TestRepeatedQueryParameter: a query parameter given twice is a 400 naming
// it, on every endpoint; before, the first value was taken and the second
// ignored (limit=10&limit=-5 answered 200). It is checked before the token:
// the request is malformed whoever sends it.
func TestRepeatedQueryParameter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar")
	id := srv.ServerID.String()
	for _, c := range []struct{ method, path, body, field string }{
		{"GET", "/v1/mcp/servers?limit=10&limit=-5", "", "limit"},
		{"GET", "/v1/mcp/servers?status=healthy&status=bogus", "", "status"},
		{"GET", "/v1/mcp/servers?module_name=a&limit=1&module_name=a", "", "module_name"},
		{"GET", "/v1/mcp/servers?cursor=A&cursor=B", "", "cursor"},
		{"GET", "/v1/mcp/skills?available=true&available=false", "", "available"},
		{"GET", "/v1/mcp/skills?name=a&name=a", "", "name"},
		{"GET", "/v1/mcp/audit?kind=mcp.server.registered&kind=mcp.server.registered", "", "kind"},
		{"GET", "/v1/mcp/watch?cursor=A&cursor=B", "", "cursor"},
		{"GET", "/v1/mcp/servers/" + id + "?x=1&x=2", "", "x"},
		{"GET", "/v1/mcp/servers/" + id + "/skills?x=1&x=", "", "x"},
		{"POST", "/v1/mcp/servers/heartbeat?a=1&a=1", `{"server_id":"` + id + `"}`, "a"},
		{"GET", "/healthz?probe=1&probe=2", "", "probe"},
		{"GET", "/readyz?probe=1&probe=2", "", "probe"},
		{"GET", "/metrics?name[]=a&name[]=b", "", "name[]"},
		// A pair that does not parse is refused, not dropped with its filter.
		{"GET", "/v1/mcp/servers?status=bogus;x", "", "status"},
		{"GET", "/v1/mcp/servers?status=%zz", "", "status"},
		{"GET", "/v1/mcp/servers?status=deregistered;", "", "status"},
		{"GET", "/v1/mcp/servers?limit=5&limit=%zz", "", "limit"},
		{"GET", "/v1/mcp/audit?%zz=1", "", "%zz"},
	} {
		t.Run(c.path, func(t *testing.T) {
			wantProblem(t, b.do(t, req{method: c.method, path: c.path, body: c.body}), http.StatusBadRequest, c.field)
		})
	}
	t.Run("distinct parameters are served", func(t *testing.T) {
		if resp := b.get(t, "/v1/mcp/servers?limit=10&status=healthy"); resp.code != http.StatusOK {
			t.Fatalf("%d %s", resp.code, resp.body)
		}
	})
}
