package agent

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/mcpinspect"
	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// TestAgentProbesCarryTheServersTrace: once registered, the agent's
// liveness probes carry a traceparent of the server's trace (its trace_id
// at mcpd, the one the registration's traceparent gave), each with a span
// id of its own.
func TestAgentProbesCarryTheServersTrace(t *testing.T) {
	t.Parallel()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	reg := setupRegistry(t)
	var (
		mu      sync.Mutex
		headers []string
	)
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tp := r.Header.Get("traceparent"); tp != "" {
				mu.Lock()
				headers = append(headers, tp)
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := mcptest.NewServer(mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: testTools})
	url := mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{Wrap: record})
	opts := fastOptions(reg, "calendar", mcpinspect.Target{URL: url})
	opts.Traceparent = "00-" + trace + "-00f067aa0ba902b7-01"
	start(t, opts)

	s := reg.waitStatus(t, "calendar", registry.StatusHealthy, 5*time.Second)
	if s.TraceID != trace {
		t.Fatalf("trace_id %s, want the traceparent's %s", s.TraceID, trace)
	}
	testwait.Eventually(t, "two probes with a traceparent", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(headers) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	spans := map[string]bool{}
	for _, tp := range headers {
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[0] != "00" || parts[1] != trace || len(parts[2]) != 16 || parts[2] == "0000000000000000" {
			t.Fatalf("probe traceparent %q, want one of trace %s", tp, trace)
		}
		spans[parts[2]] = true
	}
	if len(spans) != len(headers) {
		t.Fatalf("probes share span ids: %q", headers)
	}
}
