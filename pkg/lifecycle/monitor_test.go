package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
)

var start = time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)

// sweep is what Observe saw of one sweep.
type sweep struct {
	transitions []registry.Event
	err         error
}

// recorder is a TransitionSink that keeps every transition.
type recorder struct {
	mu  sync.Mutex
	evs []registry.Event
}

func (r *recorder) Transition(_ context.Context, ev registry.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *recorder) kinds() []registry.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []registry.EventKind{}
	for _, ev := range r.evs {
		out = append(out, ev.Kind)
	}
	return out
}

// flaky is a Store whose Sweep fails while fail says so.
type flaky struct {
	*memstore.Store
	mu    sync.Mutex
	calls int
	fail  func(call int) error
}

func (f *flaky) Sweep(ctx context.Context, req store.SweepRequest) (store.SweepResult, error) {
	f.mu.Lock()
	f.calls++
	call := f.calls
	f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(call); err != nil {
			return store.SweepResult{}, err
		}
	}
	return f.Store.Sweep(ctx, req)
}

type monitorBundle struct {
	clock  *clockwork.FakeClock
	store  *memstore.Store
	flaky  *flaky
	sink   *recorder
	logs   *testlog.Buffer
	sweeps chan sweep
	tenant uuid.UUID
}

func setupMonitor(t *testing.T, fail func(call int) error) (*monitorBundle, *lifecycle.Monitor) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(start)
	store := memstore.New(clock)
	b := &monitorBundle{
		clock: clock, store: store, flaky: &flaky{Store: store, fail: fail}, sink: &recorder{},
		logs: &testlog.Buffer{}, sweeps: make(chan sweep, 100), tenant: uuid.New(),
	}
	m := lifecycle.NewMonitor(lifecycle.MonitorOptions{
		Store: b.flaky, Sink: b.sink, Clock: clock,
		Logger:            slog.New(slog.NewTextHandler(b.logs, nil)),
		HeartbeatInterval: 10 * time.Second, Period: 5 * time.Second, Batch: 100,
		Observe: func(_ time.Duration, transitions []registry.Event, err error) {
			b.sweeps <- sweep{transitions: transitions, err: err}
		},
	})
	return b, m
}

func (b *monitorBundle) register(t *testing.T, module string) registry.Server {
	t.Helper()
	srv, _, _, err := b.store.Register(t.Context(), b.tenant, registry.ServerInfo{
		ModuleName: module, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
		Skills: []registry.SkillInfo{{Name: "s"}},
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// next waits for the next sweep, bounded in real time.
func (b *monitorBundle) next(t *testing.T) sweep {
	t.Helper()
	select {
	case s := <-b.sweeps:
		return s
	case <-time.After(5 * time.Second):
		t.Fatalf("no sweep within 5 s of real time (fake clock at +%s)", b.clock.Now().Sub(start))
		return sweep{}
	}
}

// runMonitor starts m and returns a function that stops it and waits.
func runMonitor(t *testing.T, m *lifecycle.Monitor) (stop func()) {
	t.Helper()
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return func() {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- m.Stop(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Stop returned %v, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Stop did not return within 5 s")
		}
	}
}

func kindsOf(evs []registry.Event) []registry.EventKind {
	out := []registry.EventKind{}
	for _, ev := range evs {
		out = append(out, ev.Kind)
	}
	return out
}

func TestMonitorRunSweepsAtStartAndEveryPeriod(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, m := setupMonitor(t, nil)
	srv := b.register(t, "calendar")
	stop := runMonitor(t, m)

	if s := b.next(t); s.err != nil || len(s.transitions) != 0 {
		t.Fatalf("first sweep: %v, %v; want nothing to do", kindsOf(s.transitions), s.err)
	}
	if err := b.clock.BlockUntilContext(t.Context(), 1); err != nil { // the ticker
		t.Fatal(err)
	}
	// Every 5 s a sweep: at +20 s the server is degraded, at +30 s unhealthy.
	want := map[int][]registry.EventKind{4: {registry.KindDegraded}, 6: {registry.KindUnhealthy}}
	for tick := 1; tick <= 8; tick++ {
		b.clock.Advance(5 * time.Second)
		s := b.next(t)
		if s.err != nil {
			t.Fatalf("sweep at +%ds: %v", tick*5, s.err)
		}
		if got := kindsOf(s.transitions); !slices.Equal(got, want[tick]) {
			t.Fatalf("sweep at +%ds: %v, want %v", tick*5, got, want[tick])
		}
	}
	// A part of a period is no sweep.
	b.clock.Advance(4 * time.Second)
	stop()
	if len(b.sweeps) != 0 {
		t.Fatalf("%d sweeps without a tick", len(b.sweeps))
	}
	if got := b.sink.kinds(); !slices.Equal(got, []registry.EventKind{registry.KindDegraded, registry.KindUnhealthy}) {
		t.Fatalf("alert sink got %v, want degraded, unhealthy", got)
	}
	got, err := b.store.Server(t.Context(), b.tenant, srv.ServerID)
	if err != nil || got.Status != registry.StatusUnhealthy {
		t.Fatalf("server: %s, %v; want unhealthy", got.Status, err)
	}
	if b.flaky.calls != 9 {
		t.Fatalf("store swept %d times, want 9 (one at start, one per period)", b.flaky.calls)
	}
}

func TestMonitorRunStopsOnCancel(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, m := setupMonitor(t, nil)
	b.register(t, "calendar")
	stop := runMonitor(t, m)
	b.next(t)
	stop()
	b.clock.Advance(time.Hour)
	if len(b.sweeps) != 0 || b.flaky.calls != 1 {
		t.Fatalf("after cancel: %d more sweeps, %d store calls; want none, 1", len(b.sweeps), b.flaky.calls)
	}
}

func TestMonitorRunGoesOnAfterStoreError(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	boom := errors.New("connection refused")
	b, m := setupMonitor(t, func(call int) error {
		if call <= 2 {
			return fmt.Errorf("%w: %w", registry.ErrUnavailable, boom)
		}
		return nil
	})
	b.register(t, "calendar")
	stop := runMonitor(t, m)

	for i := range 2 {
		s := b.next(t)
		if !errors.Is(s.err, boom) || !errors.Is(s.err, registry.ErrUnavailable) {
			t.Fatalf("sweep %d: err %v, want the store's", i, s.err)
		}
		if i == 0 {
			if err := b.clock.BlockUntilContext(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
		}
		b.clock.Advance(5 * time.Second)
	}
	// The store is back: the sweeps go on, and the one at +20 s moves the server.
	if s := b.next(t); s.err != nil || len(s.transitions) != 0 {
		t.Fatalf("sweep at +10s: %v, %v", kindsOf(s.transitions), s.err)
	}
	b.clock.Advance(5 * time.Second)
	if s := b.next(t); s.err != nil || len(s.transitions) != 0 {
		t.Fatalf("sweep at +15s: %v, %v", kindsOf(s.transitions), s.err)
	}
	b.clock.Advance(5 * time.Second)
	if s := b.next(t); s.err != nil || !slices.Equal(kindsOf(s.transitions), []registry.EventKind{registry.KindDegraded}) {
		t.Fatalf("sweep at +20s: %v, %v; want degraded", kindsOf(s.transitions), s.err)
	}
	stop()
	logs := b.logs.String()
	if n := strings.Count(logs, "sweep failed"); n != 2 {
		t.Fatalf("logged %d failed sweeps, want 2:\n%s", n, logs)
	}
	if !strings.Contains(logs, "connection refused") || !strings.Contains(logs, "level=ERROR") {
		t.Fatalf("log does not say why, at error level:\n%s", logs)
	}
}

func TestMonitorRunDoesNotLogCanceled(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, m := setupMonitor(t, func(call int) error {
		if call == 1 {
			return fmt.Errorf("query: %w", context.Canceled)
		}
		return nil
	})
	stop := runMonitor(t, m)
	if s := b.next(t); !errors.Is(s.err, context.Canceled) {
		t.Fatalf("first sweep: err %v, want context.Canceled", s.err)
	}
	stop()
	if logs := b.logs.String(); strings.Contains(logs, "sweep failed") {
		t.Fatalf("a canceled sweep was logged as failed:\n%s", logs)
	}
}

// Monitor.Sweep repeats the store's sweep until a batch comes back short.
func TestMonitorSweepBatches(t *testing.T) {
	for _, c := range []struct{ due, batch, calls int }{
		{0, 2, 1}, {1, 2, 1}, {4, 2, 3}, {5, 2, 3}, {5, 1000, 1},
	} {
		t.Run(fmt.Sprintf("%d_due_batch_%d", c.due, c.batch), func(t *testing.T) {
			clock := clockwork.NewFakeClockAt(start)
			store := memstore.New(clock)
			fl := &flaky{Store: store}
			sink := &recorder{}
			m := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: fl, Sink: sink, Clock: clock, Batch: c.batch})
			tenant := uuid.New()
			register := func(module string) {
				if _, _, _, err := store.Register(t.Context(), tenant, registry.ServerInfo{
					ModuleName: module, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
				}, 0); err != nil {
					t.Fatal(err)
				}
			}
			for i := range c.due {
				register(fmt.Sprintf("due-%d", i))
			}
			clock.Advance(35 * time.Second)
			register("fresh-1") // not due
			register("fresh-2")
			evs, err := m.Sweep(t.Context(), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != c.due || len(sink.kinds()) != c.due {
				t.Fatalf("Sweep: %d transitions, %d to the sink; want %d", len(evs), len(sink.kinds()), c.due)
			}
			if fl.calls != c.calls {
				t.Fatalf("store swept %d times, want %d", fl.calls, c.calls)
			}
		})
	}
}

// NewMonitor fills in the defaults: a monitor with no options still sweeps.
func TestNewMonitorDefaults(t *testing.T) {
	store := memstore.New(clockwork.NewFakeClockAt(start))
	m := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: store})
	if _, err := m.Sweep(t.Context(), start); err != nil {
		t.Fatal(err)
	}
}
