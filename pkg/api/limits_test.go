package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/limit"
)

func refusals(t *testing.T, b *bundle, reason string) float64 {
	t.Helper()
	mfs, err := b.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcpd_limit_refusals_total" {
			continue
		}
		if n := len(mf.GetMetric()); n != 3 {
			t.Fatalf("mcpd_limit_refusals_total: %d series, want one per reason", n)
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no mcpd_limit_refusals_total{reason=%q}", reason)
	return 0
}

func TestQuotaExceeded(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{maxServers: 2})
	b.register(t, "alpha")
	b.register(t, "beta")
	resp := b.post(t, registerPath, registerBody("gamma"))
	p := wantProblem(t, resp, http.StatusForbidden, "")
	if !strings.HasSuffix(p.Type, "/quota-exceeded") || p.Type != api.ProblemQuotaExceeded {
		t.Fatalf("type %q, want .../quota-exceeded", p.Type)
	}
	// An existing module re-registers at the quota: 200.
	if resp := b.post(t, registerPath, registerBody("alpha")); resp.code != http.StatusOK {
		t.Fatalf("re-registration at the quota: %d %s", resp.code, resp.body)
	}
	// Another tenant is not concerned.
	other := b.issue(t, uuid.New(), "mcp:read mcp:write")
	if resp := b.do(t, req{path: registerPath, body: registerBody("gamma"), token: other}); resp.code != http.StatusCreated {
		t.Fatalf("another tenant's registration: %d %s", resp.code, resp.body)
	}
	if got := refusals(t, b, api.RefusedQuota); got != 1 {
		t.Fatalf("quota refusals %v, want 1", got)
	}
}

func TestRateLimited(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)
	b := setup(t, setupOptions{limits: limit.New(limit.Options{Rate: 0.5, Burst: 3, Now: func() time.Time { return now }})})
	for i := range 3 {
		if resp := b.get(t, "/v1/mcp/servers"); resp.code != http.StatusOK {
			t.Fatalf("request %d within the burst: %d %s", i+1, resp.code, resp.body)
		}
	}
	resp := b.get(t, "/v1/mcp/servers")
	p := wantProblem(t, resp, http.StatusTooManyRequests, "")
	if p.Type != api.ProblemRateLimited || !strings.HasSuffix(p.Type, "/rate-limited") {
		t.Fatalf("type %q, want .../rate-limited", p.Type)
	}
	// One token per 2 s: retry after 2 whole seconds.
	if ra := resp.header.Get("Retry-After"); ra != "2" {
		t.Fatalf("Retry-After %q, want 2", ra)
	}
	// Writes are limited too, before the body is read.
	resp = b.post(t, registerPath, registerBody("alpha"))
	wantProblem(t, resp, http.StatusTooManyRequests, "")
	// Another tenant has a bucket of its own.
	other := b.issue(t, uuid.New(), "mcp:read")
	if resp := b.do(t, req{path: "/v1/mcp/servers", token: other}); resp.code != http.StatusOK {
		t.Fatalf("another tenant: %d %s", resp.code, resp.body)
	}
	// A bad token is 401, not counted against anyone.
	if resp := b.do(t, req{path: "/v1/mcp/servers", token: "garbage"}); resp.code != http.StatusUnauthorized {
		t.Fatalf("bad token: %d", resp.code)
	}
	// Health and metrics are not limited.
	if resp := b.do(t, req{path: "/healthz", token: "-"}); resp.code != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.code)
	}
	if got := refusals(t, b, api.RefusedRate); got != 2 {
		t.Fatalf("rate refusals %v, want 2", got)
	}
	now = now.Add(2 * time.Second)
	if resp := b.get(t, "/v1/mcp/servers"); resp.code != http.StatusOK {
		t.Fatalf("after Retry-After: %d %s", resp.code, resp.body)
	}
}

// Retry-After is whole seconds, at least 1, even for a wait of
// milliseconds.
func TestRetryAfterAtLeastOneSecond(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)
	b := setup(t, setupOptions{limits: limit.New(limit.Options{Rate: 1000, Burst: 1, Now: func() time.Time { return now }})})
	b.get(t, "/v1/mcp/servers")
	resp := b.get(t, "/v1/mcp/servers")
	wantProblem(t, resp, http.StatusTooManyRequests, "")
	if n, err := strconv.Atoi(resp.header.Get("Retry-After")); err != nil || n != 1 {
		t.Fatalf("Retry-After %q, want 1", resp.header.Get("Retry-After"))
	}
}
