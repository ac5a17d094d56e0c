package lifecycle_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
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
