package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/api"
)

// /readyz is 200 only when every check is; a failing check other than the
// store is named, and no cause's text reaches the client.
func TestReadyChecks(t *testing.T) {
	t.Parallel()
	var storeErr, monitorErr error
	checks := api.ReadyChecks{
		{Name: "store", Check: api.PingFunc(func(context.Context) error { return storeErr })},
		{Name: "monitor", Check: api.PingFunc(func(context.Context) error { return monitorErr })},
	}
	b := setup(t, setupOptions{pinger: checks})
	if resp := b.do(t, req{path: "/readyz", token: "-"}); resp.code != http.StatusOK {
		t.Fatalf("all ready: %d %s", resp.code, resp.body)
	}

	monitorErr = errors.New("last sweep failed: secret-cause")
	resp := b.do(t, req{path: "/readyz", token: "-"})
	p := wantProblem(t, resp, http.StatusServiceUnavailable, "")
	if p.Detail != "not ready: monitor" || strings.Contains(string(resp.body), "secret-cause") {
		t.Fatalf("monitor failing: %s", resp.body)
	}

	storeErr = errors.New("read-only: secret-cause")
	resp = b.do(t, req{path: "/readyz", token: "-"})
	p = wantProblem(t, resp, http.StatusServiceUnavailable, "")
	if !strings.Contains(p.Detail, "read-only") || strings.Contains(string(resp.body), "secret-cause") {
		t.Fatalf("store failing: %s", resp.body)
	}
	var nr *api.NotReadyError
	if err := checks.Ping(t.Context()); !errors.As(err, &nr) || nr.Check != "store" || !errors.Is(err, storeErr) {
		t.Fatalf("Ping: %v; want the store's NotReadyError", err)
	}
}
