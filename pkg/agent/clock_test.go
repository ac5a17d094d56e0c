package agent

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/mcpinspect"
	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
	"github.com/cyberos/mcpd/pkg/registry"
)

// countingRegistry answers every call as a healthy mcpd with a heartbeat
// interval of its own, and counts the calls.
type countingRegistry struct {
	interval time.Duration
	id       uuid.UUID

	mu                         sync.Mutex
	registers, beats, deregist int
}

func (r *countingRegistry) answer() registry.Server {
	return registry.Server{ServerID: r.id, Status: registry.StatusHealthy, HeartbeatIntervalSecs: r.interval.Seconds()}
}

func (r *countingRegistry) Register(context.Context, api.RegisterRequest, string) (registry.Server, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registers++
	return r.answer(), r.registers == 1, nil
}

func (r *countingRegistry) Heartbeat(context.Context, uuid.UUID) (registry.Server, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.beats++
	return r.answer(), nil
}

func (r *countingRegistry) Deregister(context.Context, uuid.UUID) (registry.Server, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deregist++
	return r.answer(), nil
}

func (r *countingRegistry) counts() (registers, beats int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.registers, r.beats
}

// clockAgent runs an agent on a fake clock without jitter until the test
// ends, and returns its waits.
func clockAgent(t *testing.T, opts Options) (*clockwork.FakeClock, <-chan time.Duration) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	opts.Clock, opts.Jitter = clock, -1
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	waits := a.Waiting()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return clock, waits
}

// nextWait is the agent's next wait on its clock.
func nextWait(t *testing.T, waits <-chan time.Duration) time.Duration {
	t.Helper()
	select {
	case d := <-waits:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not wait on its clock within 10s")
		return 0
	}
}

// One heartbeat per interval that mcpd says, no more, no less: the fake
// clock moves the agent from one to the next.
func TestAgentHeartbeatsOncePerInterval(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewServer(mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: testTools})
	target := mcpinspect.Target{URL: mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{})}
	reg := &countingRegistry{interval: 30 * time.Second, id: uuid.New()}
	opts := fastOptions(&testRegistry{}, "calendar", target)
	opts.Registry = reg
	clock, waits := clockAgent(t, opts)

	if d := nextWait(t, waits); d != reg.interval {
		t.Fatalf("first wait %s after the registration, want mcpd's interval %s", d, reg.interval)
	}
	for i := 1; i <= 5; i++ {
		clock.Advance(reg.interval)
		if d := nextWait(t, waits); d != reg.interval {
			t.Fatalf("wait %s after heartbeat %d, want %s", d, i, reg.interval)
		}
		if registers, beats := reg.counts(); registers != 1 || beats != i {
			t.Fatalf("after %d intervals: %d registrations, %d heartbeats; want 1 and %d", i, registers, beats, i)
		}
	}
}

// A stdio server that dies at every start is started again after a wait
// that doubles up to RestartMax.
func TestAgentRestartBackoff(t *testing.T) {
	t.Parallel()
	st := mcptest.NewStdio(t, mcptest.Config{Name: "files", Version: "1.0.0", Tools: testTools, ExitAtStart: 3})
	reg := &countingRegistry{interval: 30 * time.Second, id: uuid.New()}
	opts := fastOptions(&testRegistry{}, "files", mcpinspect.Target{Command: st.Command})
	opts.Registry = reg
	opts.RestartMin, opts.RestartMax = time.Second, 8*time.Second
	clock, waits := clockAgent(t, opts)

	var got []time.Duration
	for range 6 {
		d := nextWait(t, waits)
		got = append(got, d)
		clock.Advance(d)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("waits between restarts %v, want %v", got, want)
	}
	nextWait(t, waits) // after the seventh start
	if n := st.Starts(); n != 7 {
		t.Fatalf("%d starts, want 7 (the first and one after each wait)", n)
	}
	if registers, _ := reg.counts(); registers != 0 {
		t.Fatalf("%d registrations of a server that never started", registers)
	}
}
