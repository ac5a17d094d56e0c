package lifecycle_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func registerMany(t *testing.T, st store.Store, tenant uuid.UUID, prefix string, n int) {
	t.Helper()
	for i := range n {
		info := registry.ServerInfo{ModuleName: fmt.Sprintf("%s-%02d", prefix, i), Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}, TraceID: registry.NewTraceID()}
		if _, _, _, err := st.Register(t.Context(), tenant, info, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// More than half of a tenant's live servers, and at least 10, going
// unhealthy in one sweep raise one mass-loss report per tenant, and the
// transitions are still applied.
func TestMonitorMassHeartbeatLoss(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	st := memstore.New(clock)
	lost, fine, small := uuid.New(), uuid.New(), uuid.New()
	registerMany(t, st, lost, "lost", 12)
	registerMany(t, st, fine, "fine", 20)
	registerMany(t, st, small, "small", 4)
	var reports []lifecycle.MassLoss
	m := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: st, Clock: clock, HeartbeatInterval: 10 * time.Second,
		Period: 5 * time.Second, BlindAfter: -1, OnMassLoss: func(l lifecycle.MassLoss) { reports = append(reports, l) }})
	clock.Advance(20 * time.Second)
	// Keep 11 of fine's 20 servers beating: 9 going unhealthy is under both bounds.
	page, err := st.Servers(t.Context(), fine, registry.ServerFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range page.Servers[:11] {
		if _, _, err := st.Heartbeat(t.Context(), fine, s.ServerID); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(15 * time.Second)
	evs, err := m.Sweep(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 12+9+4 {
		t.Fatalf("%d transitions, want all 25 applied", len(evs))
	}
	if len(reports) != 1 || reports[0].TenantID != lost || reports[0].Unhealthy != 12 || reports[0].Live != 12 {
		t.Fatalf("mass-loss reports %+v, want one for the tenant that lost 12 of 12", reports)
	}
}

// A monitor over a guarded store reports each blind window once.
func TestMonitorReportsBlindWindow(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	st := memstore.New(clock)
	registerMany(t, st, uuid.New(), "calendar", 1)
	var windows []store.BlindWindow
	m := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: st, Clock: clock, HeartbeatInterval: 10 * time.Second,
		Period: 5 * time.Second, OnBlind: func(w store.BlindWindow) { windows = append(windows, w) }})
	if _, err := m.Sweep(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	for range 2 {
		evs, err := m.Sweep(t.Context(), time.Time{})
		if err != nil || len(evs) != 0 {
			t.Fatalf("sweep after a blind minute: %d transitions, %v", len(evs), err)
		}
	}
	if len(windows) != 1 || windows[0].Duration() != time.Minute {
		t.Fatalf("windows %+v, want one of a minute", windows)
	}
}

// partialSweeper is a store whose sweeps fail for some tenants (a Citus
// worker down) after moving the others'.
type partialSweeper struct {
	*memstore.Store
}

func (p partialSweeper) Sweep(ctx context.Context, req store.SweepRequest) (store.SweepResult, error) {
	res, err := p.Store.Sweep(ctx, req)
	if err != nil {
		return res, err
	}
	return res, &registry.PartialError{Failed: 1, Tenants: 2, Err: registry.ErrUnavailable}
}

// A sweep that failed for some tenants hands the others' transitions to
// the sink and leaves the monitor healthy (its replica stays ready).
func TestMonitorPartialSweepStaysHealthy(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	store := memstore.New(clock)
	rec := &recorder{}
	m := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: partialSweeper{store}, Sink: rec, Clock: clock,
		HeartbeatInterval: registry.DefaultHeartbeatInterval, Period: time.Hour, BlindAfter: -1})
	if _, _, _, err := store.Register(t.Context(), uuid.New(), registry.ServerInfo{ModuleName: "calendar",
		Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * registry.DefaultHeartbeatInterval)
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Stop(context.Background()) }()
	testwait.Eventually(t, "the sweep's transition handed on", func() bool { return len(rec.kinds()) == 1 })
	if err := m.Healthy(); err != nil {
		t.Fatalf("Healthy after a partial sweep: %v", err)
	}
}

// outOfTimeSweeper is a store whose sweep commits its transitions and then
// runs out of its time (the caller's context ends), as a Citus sweep of a
// mass outage can; its live counts refuse an ended context.
type outOfTimeSweeper struct {
	*memstore.Store
	expire context.CancelFunc
}

func (o outOfTimeSweeper) Sweep(ctx context.Context, req store.SweepRequest) (store.SweepResult, error) {
	res, err := o.Store.Sweep(ctx, req)
	if err != nil {
		return res, err
	}
	o.expire()
	return res, fmt.Errorf("%w: %w", registry.ErrUnavailable, context.DeadlineExceeded)
}

func (o outOfTimeSweeper) LiveCounts(ctx context.Context, tenants []uuid.UUID) (map[uuid.UUID]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return o.Store.LiveCounts(ctx, tenants)
}

// A sweep that moved a tenant's servers and then ran out of its time still
// reports the tenant's mass loss: the transitions are committed, and the
// check reads the live counts in a time of its own.
func TestMonitorMassLossOfASweepOutOfTime(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	mem := memstore.New(clock)
	lost := uuid.New()
	registerMany(t, mem, lost, "lost", 12)
	ctx, expire := context.WithCancel(t.Context())
	defer expire()
	var reports []lifecycle.MassLoss
	m := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: outOfTimeSweeper{mem, expire}, Clock: clock,
		HeartbeatInterval: 10 * time.Second, Period: 5 * time.Second, BlindAfter: -1,
		OnMassLoss: func(l lifecycle.MassLoss) { reports = append(reports, l) }})
	clock.Advance(35 * time.Second)
	evs, err := m.Sweep(ctx, time.Time{})
	if err == nil || len(evs) != 12 {
		t.Fatalf("sweep: %d transitions, %v; want the 12 and the sweep's running out of time", len(evs), err)
	}
	if len(reports) != 1 || reports[0].TenantID != lost || reports[0].Unhealthy != 12 {
		t.Fatalf("mass-loss reports %+v, want one for the tenant that lost 12 of 12", reports)
	}
}

// A flush before the sweep that fails on every sweep (a Citus worker down
// with heartbeats of its tenants held) is logged once per ten seconds,
// with how many sweeps met it since.
func TestMonitorFailedFlushLoggedOncePerInterval(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	logs := &testlog.Buffer{}
	m := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: memstore.New(clock), Clock: clock,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Period: time.Hour, BlindAfter: -1,
		BeforeSweep: func(context.Context) error { return registry.ErrUnavailable }})
	records := func() []string { return logs.Lines("writing held heartbeats first failed") }
	for range 41 { // a sweep every 250 ms, from 0 to 10 s
		if _, err := m.Sweep(t.Context(), time.Time{}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(250 * time.Millisecond)
	}
	if got := records(); len(got) != 2 || strings.Contains(got[0], `"suppressed"`) || !strings.Contains(got[1], `"suppressed":39`) {
		t.Fatalf("41 sweeps over 10 s: %d records, want 2, the second with suppressed 39:\n%s", len(got), strings.Join(got, "\n"))
	}
}
