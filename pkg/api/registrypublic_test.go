package api_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/limit"
)

// With a public tenant, a GET on /v0.1 without a token reads that tenant;
// a token reads its own tenant, a bad token is still 401; nothing else
// (/v1, /mcp, the write side) opens up.
func TestRegistryPublicTenant(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{public: true})
	b.register(t, "calendar")
	other := b.issue(t, uuid.New(), "mcp:read")

	noToken := b.do(t, req{path: "/v0.1/servers", token: "-"})
	if noToken.code != http.StatusOK {
		t.Fatalf("GET /v0.1/servers without a token: %d %s", noToken.code, noToken.body)
	}
	if got := names(strictDecode[oaServerList](t, noToken)); !slices.Equal(got, []string{"local.mcpd/calendar"}) {
		t.Fatalf("public list %v", got)
	}
	for _, path := range []string{"/v0.1/servers/local.mcpd%2Fcalendar/versions",
		"/v0.1/servers/local.mcpd%2Fcalendar/versions/latest", "/v0.1/servers/local.mcpd%2Fcalendar/versions/1.3.2"} {
		if resp := b.do(t, req{path: path, token: "-"}); resp.code != http.StatusOK {
			t.Fatalf("GET %s without a token: %d %s", path, resp.code, resp.body)
		}
		if resp := b.do(t, req{method: http.MethodHead, path: path, token: "-"}); resp.code != http.StatusOK {
			t.Fatalf("HEAD %s without a token: %d", path, resp.code)
		}
	}
	// A token reads its own tenant, which has nothing.
	if got := names(strictDecode[oaServerList](t, b.do(t, req{path: "/v0.1/servers", token: other}))); len(got) != 0 {
		t.Fatalf("another tenant's token lists %v", got)
	}
	// A bad or empty Authorization is checked, not taken for none.
	for _, tok := range []string{"not-a-token", noneToken(b.tenant)} {
		if resp := b.do(t, req{path: "/v0.1/servers", token: tok}); resp.code != http.StatusUnauthorized {
			t.Fatalf("bad token: %d %s", resp.code, resp.body)
		}
	}
	if resp := b.do(t, req{path: "/v0.1/servers", token: "-", header: map[string]string{"Authorization": ""}}); resp.code != http.StatusUnauthorized {
		t.Fatalf("empty Authorization: %d %s", resp.code, resp.body)
	}
	// Read-only, /v0.1 only.
	for _, r := range []req{
		{path: "/v1/mcp/servers", token: "-"},
		{path: "/v1/mcp/audit", token: "-"},
		{method: http.MethodPost, path: registerPath, body: registerBody("intruder"), token: "-"},
	} {
		wantProblem(t, b.do(t, r), http.StatusUnauthorized, "")
	}
	if resp := b.do(t, req{method: http.MethodPost, path: "/v0.1/publish", body: `{}`, token: "-"}); resp.code != http.StatusNotImplemented {
		t.Fatalf("publish without a token: %d", resp.code)
	}
	if resp := b.do(t, req{method: http.MethodDelete, path: "/v0.1/servers/local.mcpd%2Fcalendar/versions/1.3.2", token: "-"}); resp.code != http.StatusNotImplemented {
		t.Fatalf("DELETE without a token: %d", resp.code)
	}
	if got := names(b.registryList(t, "")); !slices.Equal(got, []string{"local.mcpd/calendar"}) {
		t.Fatalf("after the refused writes %v", got)
	}
}

// Without a public tenant, a GET on /v0.1 without a token is 401, as before.
func TestRegistryNoPublicTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "calendar")
	wantProblem(t, b.do(t, req{path: "/v0.1/servers", token: "-"}), http.StatusUnauthorized, "")
	wantProblem(t, b.do(t, req{path: "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest", token: "-"}), http.StatusUnauthorized, "")
}

// Anonymous reads of the public tenant are limited at the tenant's rate,
// in a bucket of their own: clients without a token cannot use up what the
// tenant's own calls need (a black-box attack made heartbeats 429 and
// servers falsely unhealthy that way).
func TestRegistryPublicTenantRateLimit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)
	b := setup(t, setupOptions{public: true,
		limits: limit.New(limit.Options{Rate: 1, Burst: 3, Now: func() time.Time { return now }})})
	codes := []int{}
	for range 5 {
		codes = append(codes, b.do(t, req{path: "/v0.1/servers", token: "-"}).code)
	}
	if !slices.Equal(codes, []int{200, 200, 200, 429, 429}) {
		t.Fatalf("anonymous codes %v, want three answers then 429", codes)
	}
	resp := b.do(t, req{path: "/v0.1/servers", token: "-"})
	wantProblem(t, resp, http.StatusTooManyRequests, "")
	if resp.header.Get("Retry-After") == "" || resp.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("429 headers %v", resp.header)
	}
	// The tenant's own token still has its whole burst, and then its own
	// limit.
	codes = codes[:0]
	for range 4 {
		codes = append(codes, b.do(t, req{path: "/v0.1/servers"}).code)
	}
	if !slices.Equal(codes, []int{200, 200, 200, 429}) {
		t.Fatalf("token codes after the anonymous burst %v, want three answers then 429", codes)
	}
}

// /v0.1 answers CORS for any origin, preflight included, errors too; no
// other route does.
func TestRegistryCORS(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{public: true})
	b.register(t, "calendar")
	origin := map[string]string{"Origin": "https://ide.example"}

	pre := b.do(t, req{method: http.MethodOptions, path: "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest", token: "-",
		header: map[string]string{"Origin": "https://ide.example", "Access-Control-Request-Method": "GET",
			"Access-Control-Request-Headers": "authorization,if-none-match"}})
	if pre.code != http.StatusNoContent || pre.header.Get("Access-Control-Allow-Origin") != "*" ||
		pre.header.Get("Access-Control-Allow-Methods") != "GET, HEAD, OPTIONS" ||
		pre.header.Get("Access-Control-Allow-Headers") != "Authorization, If-None-Match" ||
		pre.header.Get("Access-Control-Allow-Credentials") != "" || len(pre.body) != 0 {
		t.Fatalf("preflight: %d %v %s", pre.code, pre.header, pre.body)
	}
	for _, r := range []req{
		{path: "/v0.1/servers", token: "-", header: origin},
		{path: "/v0.1/servers", header: origin},
		{path: "/v0.1/servers/local.mcpd%2Fnone/versions/latest", token: "-", header: origin},
		{path: "/v0.1/servers?limit=0", token: "-", header: origin},
		{path: "/v0.1/servers", token: "bad", header: origin},
		{path: "/v0.1/nowhere", token: "-", header: origin},
	} {
		resp := b.do(t, r)
		if resp.header.Get("Access-Control-Allow-Origin") != "*" || resp.header.Get("Access-Control-Expose-Headers") != "ETag" ||
			resp.header.Get("Access-Control-Allow-Credentials") != "" {
			t.Fatalf("%s (%d): CORS headers %v", r.path, resp.code, resp.header)
		}
	}
	for _, path := range []string{"/v1/mcp/servers", "/readyz", "/healthz", "/metrics", "/mcp"} {
		for _, method := range []string{http.MethodGet, http.MethodOptions} {
			resp := b.do(t, req{method: method, path: path, header: origin})
			if v := resp.header.Get("Access-Control-Allow-Origin"); v != "" {
				t.Fatalf("%s %s: Access-Control-Allow-Origin %q", method, path, v)
			}
			if method == http.MethodOptions && resp.code == http.StatusNoContent {
				t.Fatalf("OPTIONS %s answered as a preflight", path)
			}
		}
	}
}
