package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestQueryTextRefusedOnPostgreSQL is the black-box finding of issue 33:
// /v0.1 search=%00, %ff or %C0%80 was a 500 on PostgreSQL, logged as ERROR
// and counted in mcpd_store_errors_total, so that any reader could raise
// that signal. Now each string of a query that reaches the store is a 400
// naming its parameter, and the store never sees it.
func TestQueryTextRefusedOnPostgreSQL(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	p := startMcpd(t, db.AppURL)
	h := newHostile(t, p, uuid.New())
	h.want(t, http.StatusCreated, "", http.MethodPost, "/v1/mcp/servers/register", "", nil,
		registerJSON("calendar", `,"skills":[{"name":"send"}]`))
	for _, v := range []string{"%00", "%ff", "%C0%80", "a%00b", "%ED%A0%80"} {
		for _, c := range []struct{ path, param string }{
			{"/v0.1/servers?search=" + v, "search"},
			{"/v0.1/servers?include_deleted=true&search=" + v, "search"},
			{"/v0.1/servers?version=" + v, "version"},
			{"/v0.1/servers?updated_since=2026-01-01t00:00:00z&search=" + v, "search"},
		} {
			code, _, body := h.do(t, http.MethodGet, c.path, "", nil, nil)
			var e struct{ Error string }
			if code != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || !strings.HasPrefix(e.Error, c.param+" ") {
				t.Errorf("%s: %d %s, want 400 naming %s", c.path, code, truncated(body), c.param)
			}
		}
		h.want(t, http.StatusBadRequest, "name", http.MethodGet, "/v1/mcp/skills?name="+v, "", nil, "")
		h.want(t, http.StatusBadRequest, "module_name", http.MethodGet, "/v1/mcp/servers?module_name="+v, "", nil, "")
		h.want(t, http.StatusBadRequest, "name", http.MethodGet, "/v1/mcp/skills/"+v+"/availability", "", nil, "")
	}
	code, _, body := h.do(t, http.MethodGet, "/v0.1/servers?search=alen&updated_since=2026-01-01t00:00:00z", "", nil, nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"local.mcpd/calendar"`) {
		t.Fatalf("search=alen: %d %s", code, truncated(body))
	}
	// A sweep that a loaded machine let run out of its time (the 200ms
	// interval) counts in both mcpd_store_errors_total and
	// mcpd_sweep_failures_total and logs "sweep failed": that is no
	// request's doing, and the rest must be nothing.
	_, _, metrics := h.do(t, http.MethodGet, "/metrics", "-", nil, nil)
	storeErrs := metricValue(string(metrics), "mcpd_store_errors_total", nil)
	sweepFails := metricValue(string(metrics), "mcpd_sweep_failures_total", nil)
	if n := storeErrs - sweepFails; n != 0 {
		t.Errorf("mcpd_store_errors_total %v, of which %v not failed sweeps, want 0", storeErrs, n)
	}
	if h.statuses[http.StatusInternalServerError] != 0 {
		t.Errorf("%d answers were 500", h.statuses[http.StatusInternalServerError])
	}
	assertNoErrorLogs(t, "mcpd", p.stderr.String())
}
