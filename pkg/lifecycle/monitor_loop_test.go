package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// blocking is a Store whose sweeps wait for release (or their context),
// saying when one is in flight and when it finished.
type blocking struct {
	*memstore.Store
	entered  chan context.Context
	release  chan struct{}
	finished atomic.Int32
}

func (b *blocking) Sweep(ctx context.Context, req store.SweepRequest) (store.SweepResult, error) {
	b.entered <- ctx
	defer b.finished.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
		return store.SweepResult{}, ctx.Err()
	}
	return b.Store.Sweep(ctx, req)
}

func newBlocking(t *testing.T) (*blocking, *lifecycle.Monitor, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(start)
	b := &blocking{Store: memstore.New(clock), entered: make(chan context.Context, 10), release: make(chan struct{})}
	m := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: b, Clock: clock,
		HeartbeatInterval: 10 * time.Second, Period: 5 * time.Second, SweepTimeout: 7 * time.Second})
	return b, m, clock
}

func (b *blocking) next(t *testing.T) context.Context {
	t.Helper()
	select {
	case ctx := <-b.entered:
		return ctx
	case <-time.After(5 * time.Second):
		t.Fatal("no sweep within 5 s of real time")
		return nil
	}
}

// Start sweeps at once, each sweep with its deadline, then every period;
// Stop waits for the sweep in flight to finish.
func TestMonitorStartStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, m, clock := newBlocking(t)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err == nil {
		t.Fatal("a second Start: no error")
	}
	ctx := b.next(t) // the initial sweep, before any tick
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > 7*time.Second {
		t.Fatalf("sweep deadline %v (set %v), want within the sweep timeout", dl, ok)
	}
	b.release <- struct{}{}
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	b.next(t) // the tick's sweep, in flight
	stopped := make(chan error, 1)
	go func() { stopped <- m.Stop(context.Background()) }()
	close(b.release)
	if err := <-stopped; err != nil || b.finished.Load() != 2 {
		t.Fatalf("Stop = %v with %d sweeps finished; want nil once the one in flight finished", err, b.finished.Load())
	}
	if err := m.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	clock.Advance(time.Hour)
	if n := len(b.entered); n != 0 {
		t.Fatalf("%d sweeps after Stop", n)
	}
}

// A Stop whose context ends cancels the sweep in flight and says so.
func TestMonitorStopBounded(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, m, _ := newBlocking(t)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sweepCtx := b.next(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop = %v, want the context's end", err)
	}
	if sweepCtx.Err() == nil {
		t.Fatal("the sweep in flight was not cancelled")
	}
}

// Healthy reports failing sweeps, two in a row, until one succeeds; a
// single failed sweep (a timeout on a loaded machine) it does not report.
func TestMonitorHealthy(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	boom := errors.New("connection refused")
	b, m := setupMonitor(t, func(call int) error {
		if call == 1 || call == 3 || call == 4 {
			return boom
		}
		return nil
	})
	if err := m.Healthy(); err != nil {
		t.Fatalf("Healthy before any sweep: %v", err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Stop(context.Background()) }()
	// sweep lets the next sweep run; failed sweeps are logged once their
	// failure is recorded, and the sweeps run one after another.
	sweep := func(first bool) {
		t.Helper()
		if !first {
			b.clock.Advance(5 * time.Second)
		}
		b.next(t)
	}
	recorded := func(failures int) {
		t.Helper()
		testwait.Eventually(t, fmt.Sprintf("%d failed sweeps logged", failures), func() bool {
			return strings.Count(b.logs.String(), `msg="sweep failed"`) == failures
		})
	}
	sweep(true) // fails
	recorded(1)
	if err := m.Healthy(); err != nil {
		t.Fatalf("Healthy after one failed sweep: %v, want nil", err)
	}
	sweep(false) // succeeds
	sweep(false) // fails
	recorded(2)
	if err := m.Healthy(); err != nil {
		t.Fatalf("Healthy after a failed sweep that followed a good one: %v, want nil", err)
	}
	sweep(false) // fails
	recorded(3)
	if err := m.Healthy(); !errors.Is(err, boom) {
		t.Fatalf("Healthy after two failed sweeps in a row: %v, want the last one's error", err)
	}
	sweep(false) // succeeds
	testwait.Eventually(t, "healthy again", func() bool { return m.Healthy() == nil })
}
