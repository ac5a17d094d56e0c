package agent

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/mcpinspect"
	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// TestAgentMCPHeadersAndRefusal: the agent sends its MCP headers to the
// server; a server that answers 401 or 403 is up and stays healthy; one
// that stops answering goes unhealthy.
func TestAgentMCPHeadersAndRefusal(t *testing.T) {
	t.Parallel()
	reg := setupRegistry(t)
	var refuse atomic.Int32 // 0: check the header; else the status to answer
	var down atomic.Bool
	srv := mcptest.NewServer(mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: testTools})
	url := mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case down.Load():
				http.Error(w, "down", http.StatusServiceUnavailable)
			case refuse.Load() != 0:
				http.Error(w, "no", int(refuse.Load()))
			case r.Header.Get("Authorization") != "Bearer mcp-secret" || r.Header.Get("X-Tenant") != "acme":
				http.Error(w, "who are you", http.StatusUnauthorized)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}})
	opts := fastOptions(reg, "calendar", mcpinspect.Target{URL: url})
	opts.MCPHeader = http.Header{"Authorization": {"Bearer mcp-secret"}, "X-Tenant": {"acme"}}
	ag := start(t, opts)
	srvReg := reg.waitStatus(t, "calendar", registry.StatusHealthy, 5*time.Second)

	for _, status := range []int32{http.StatusUnauthorized, http.StatusForbidden} {
		refuse.Store(status)
		before := reg.heartbeats.Load()
		testwait.Throughout(t, 5*testInterval, func() {
			if s, _ := reg.server(t, "calendar"); s.Status != registry.StatusHealthy {
				t.Fatalf("status %s while the server answers %d", s.Status, status)
			}
		})
		if n := reg.heartbeats.Load() - before; n < 3 {
			t.Fatalf("%d heartbeats in 5 intervals of %d answers, want about 5", n, status)
		}
	}

	down.Store(true)
	reg.waitStatus(t, "calendar", registry.StatusUnhealthy, 5*time.Second)
	down.Store(false)
	refuse.Store(0)
	back := reg.waitStatus(t, "calendar", registry.StatusHealthy, 5*time.Second)
	if back.ServerID != srvReg.ServerID {
		t.Fatalf("recovered as %s, want %s", back.ServerID, srvReg.ServerID)
	}
	_ = ag.stop(t)
}

// TestAgentHintsMCPHeaderOnFirstRefusal: an agent without the MCP server's
// credentials says "check --mcp-header" at the first 401 or 403, also
// before its first registration (then it only logged the connection error,
// "Unauthorized", and retried without the hint).
func TestAgentHintsMCPHeaderOnFirstRefusal(t *testing.T) {
	t.Parallel()
	reg := setupRegistry(t)
	srv := mcptest.NewServer(mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: testTools})
	url := mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{Wrap: func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "who are you", http.StatusUnauthorized)
		})
	}})
	ag := start(t, fastOptions(reg, "calendar", mcpinspect.Target{URL: url}))
	testwait.Until(t, "the first connection attempt", 5*time.Second, func() bool {
		return strings.Contains(ag.logs.String(), "connect to the MCP server")
	})
	first := ag.logs.String()
	if !strings.Contains(first, "check --mcp-header") {
		t.Fatalf("first refusal logged without the hint:\n%s", first)
	}
	_ = ag.stop(t)
	if n := strings.Count(ag.logs.String(), "check --mcp-header"); n != 1 {
		t.Fatalf("the hint logged %d times, want once per stretch of refusals:\n%s", n, ag.logs.String())
	}
}
