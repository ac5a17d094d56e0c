package agent

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/mcpinspect"
	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
	"github.com/cyberos/mcpd/pkg/registry"
)

// unavailableRegistry answers every call 503 with a Retry-After.
type unavailableRegistry struct{ retryAfter time.Duration }

func (r unavailableRegistry) problem() error {
	return &apiwire.Problem{Type: "about:blank", Title: "Service Unavailable", Status: http.StatusServiceUnavailable,
		RetryAfter: r.retryAfter}
}

func (r unavailableRegistry) Register(context.Context, apiwire.RegisterRequest, string) (registry.Server, bool, error) {
	return registry.Server{}, false, r.problem()
}

func (r unavailableRegistry) Heartbeat(context.Context, uuid.UUID) (registry.Server, error) {
	return registry.Server{}, r.problem()
}

func (r unavailableRegistry) Deregister(context.Context, uuid.UUID) (registry.Server, error) {
	return registry.Server{}, r.problem()
}

// TestAgentRetriesHonourRetryAfterSpreadAndCapped: an agent whose calls get
// 503 waits at least the server's Retry-After, spread by its jitter so that
// a fleet does not retry in lockstep, and never longer than the heartbeat
// interval, however long its backoff has grown. Before, it retried after
// its own backoff (0.5 s, before the Retry-After) and waited up to
// RetryMax (30 s, three intervals) while registering.
func TestAgentRetriesHonourRetryAfterSpreadAndCapped(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewServer(mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: testTools})
	target := mcpinspect.Target{URL: mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{})}
	const (
		retryAfter = 2 * time.Second
		interval   = 10 * time.Second
	)
	clock := clockwork.NewFakeClock()
	a, err := New(Options{
		Module: "calendar", Target: target, Registry: unavailableRegistry{retryAfter: retryAfter},
		Clock: clock, Rand: rand.New(rand.NewPCG(1, 2)), Jitter: 0.2,
		RetryMin: 500 * time.Millisecond, RetryMax: 30 * time.Second, Interval: interval,
		ProbeTimeout: time.Second, ConnectTimeout: 5 * time.Second, CallTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	waits := a.Waiting()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	distinct := map[time.Duration]bool{}
	for i := range 12 {
		d := nextWait(t, waits)
		if d < retryAfter || d > interval {
			t.Fatalf("wait %d: %s, want from the Retry-After %s to the interval %s", i+1, d, retryAfter, interval)
		}
		distinct[d] = true
		clock.Advance(d)
	}
	if len(distinct) < 6 {
		t.Fatalf("12 waits took %d distinct values: retries are not spread", len(distinct))
	}
}

// TestAgentReconnectBackoffCappedByInterval: the wait before connecting
// again to an MCP server that is down (a stdio server that dies at every
// start here; over HTTP the same backoff) doubles up to the heartbeat
// interval, not past it, so that a server that comes back is healthy within
// one interval. Before, it grew to RestartMax (30 s): a server that had been
// down 45 s was seen again up to 30 s after it was back.
func TestAgentReconnectBackoffCappedByInterval(t *testing.T) {
	t.Parallel()
	st := mcptest.NewStdio(t, mcptest.Config{Name: "files", Version: "1.0.0", Tools: testTools, ExitAtStart: 8})
	reg := &countingRegistry{interval: 5 * time.Second, id: uuid.New()}
	opts := fastOptions(&testRegistry{}, "files", mcpinspect.Target{Command: st.Command})
	opts.Registry = reg
	opts.Interval = 5 * time.Second
	opts.RestartMin, opts.RestartMax = time.Second, 30*time.Second
	clock, waits := clockAgent(t, opts)

	var got []time.Duration
	for range 7 {
		d := nextWait(t, waits)
		got = append(got, d)
		clock.Advance(d)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("waits between connections %v, want %v (capped by the interval)", got, want)
	}
}
