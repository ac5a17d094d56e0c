package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/api"
)

// unstorableQueryValues are query values, as sent, that PostgreSQL's text
// cannot hold: NUL, a byte that is not UTF-8, an overlong encoding of NUL,
// and each inside otherwise good text.
var unstorableQueryValues = []string{"%00", "%ff", "%C0%80", "cal%00endar", "cal%ffendar", "%C0%AF", "%ED%A0%80"}

// TestQueryTextRefused: every string of a query that reaches the store is
// valid UTF-8 without NUL, or a 400 naming its parameter. /v0.1's search
// and version were passed to the store as given: a 500 on PostgreSQL
// (counted in mcpd_store_errors_total, so any reader could raise it), a 200
// on the memory store.
func TestQueryTextRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{feed: true})
	b.register(t, "calendar", "send")
	for _, v := range unstorableQueryValues {
		for _, c := range []struct{ path, param string }{
			{"/v0.1/servers?search=" + v, "search"},
			{"/v0.1/servers?version=" + v, "version"},
			{"/v0.1/servers?include_deleted=true&search=" + v, "search"},
		} {
			resp := b.get(t, c.path)
			if resp.code != http.StatusBadRequest {
				t.Errorf("%s: %d %s, want 400", c.path, resp.code, resp.body)
				continue
			}
			if e := strictDecode[oaError](t, resp); !strings.HasPrefix(e.Error, c.param+" ") {
				t.Errorf("%s: error %q does not name %s", c.path, e.Error, c.param)
			}
			if resp.header.Get("ETag") == "" {
				t.Errorf("%s: no ETag on the error", c.path)
			}
		}
		for _, c := range []struct{ path, param string }{
			{"/v1/mcp/skills?name=" + v, "name"},
			{"/v1/mcp/skills?module_name=" + v, "module_name"},
			{"/v1/mcp/skills?protocol=" + v, "protocol"},
			{"/v1/mcp/servers?module_name=" + v, "module_name"},
			{"/v1/mcp/audit?module_name=" + v, "module_name"},
			{"/v1/mcp/audit?server_id=" + v, "server_id"},
			{"/v1/mcp/audit?kind=" + v, "kind"},
			{"/v1/mcp/servers?status=" + v, "status"},
			{"/v1/mcp/skills/" + v + "/availability", "name"},
			{"/v1/mcp/availability?server_ids=" + v, "server_ids"},
		} {
			wantProblem(t, b.get(t, c.path), http.StatusBadRequest, c.param)
		}
	}
	// Good text is still searched.
	if l := b.registryList(t, "?search=alen"); len(l.Servers) != 1 {
		t.Fatalf("search=alen: %d servers, want 1", len(l.Servers))
	}
	if l := b.registryList(t, "?search=%C3%A9"); len(l.Servers) != 0 {
		t.Fatalf("search=é: %d servers, want 0", len(l.Servers))
	}
}

// TestRegistryWhichAnswersCarryETags: every answer of a /v0.1 endpoint
// carries an ETag, its errors (400, 404 {"error"}) too, with the tag of
// their own body; the answers that come before an endpoint is reached
// (401 and 403 problems, as on /v1, and the router's 404 or 405 problem
// for a path that is no endpoint) carry none, as docs/registry-api.md says.
func TestRegistryWhichAnswersCarryETags(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{feed: true})
	b.register(t, "calendar")
	for _, c := range []struct {
		r    req
		code int
		etag bool
	}{
		{req{path: "/v0.1/servers"}, http.StatusOK, true},
		{req{path: "/v0.1/servers?limit=0"}, http.StatusBadRequest, true},
		{req{path: "/v0.1/servers?search=%00"}, http.StatusBadRequest, true},
		{req{path: "/v0.1/servers?limit=1&limit=2"}, http.StatusBadRequest, true},
		{req{path: "/v0.1/servers/local.mcpd%2Fnosuch/versions"}, http.StatusNotFound, true},
		{req{path: "/v0.1/servers/local.mcpd%2Fcalendar/versions/9.9.9"}, http.StatusNotFound, true},
		{req{path: "/v0.1/servers", token: "-"}, http.StatusUnauthorized, false},
		// The router's own answer (404, or 405 where a pattern takes
		// another method only), a problem.
		{req{path: "/v0.1/servers/a/b/c/d"}, 0, false},
		{req{path: "/v0.1/nosuch"}, 0, false},
	} {
		resp := b.do(t, c.r)
		if c.code == 0 && (resp.code == http.StatusNotFound || resp.code == http.StatusMethodNotAllowed) &&
			resp.header.Get("Content-Type") == api.ContentTypeProblem {
			c.code = resp.code
		}
		if resp.code != c.code || (resp.header.Get("ETag") != "") != c.etag {
			t.Errorf("%s (token %q): %d with ETag %q, want %d with an ETag %t", c.r.path, c.r.token, resp.code,
				resp.header.Get("ETag"), c.code, c.etag)
		}
	}
}
