package memstore_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clock := clockwork.NewFakeClockAt(storetest.Start)
		s := memstore.New(clock)
		return storetest.Harness{Store: s, Clock: clock, DisableSkill: s.DisableSkill}
	})
}

func TestDisableSkillUnknown(t *testing.T) {
	ctx := t.Context()
	s := memstore.New(clockwork.NewFakeClockAt(storetest.Start))
	tenant := uuid.New()
	srv, _, _, err := s.Register(ctx, tenant, info("calendar", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant, server uuid.UUID
		name, reason   string
	}{
		{tenant, srv.ServerID, "nope", "x"},
		{uuid.New(), srv.ServerID, "skill-0", "x"},
		{tenant, uuid.New(), "skill-0", "x"},
	} {
		if err := s.DisableSkill(ctx, c.tenant, c.server, c.name, c.reason); err == nil {
			t.Fatalf("disable skill %+v: no error", c)
		}
	}
	if err := s.DisableSkill(ctx, tenant, srv.ServerID, "skill-0", ""); err == nil {
		t.Fatalf("disable skill with no reason: no error")
	}
}

func TestSweepRejectsBadArguments(t *testing.T) {
	s := memstore.New(clockwork.NewFakeClockAt(storetest.Start))
	if _, err := s.Sweep(t.Context(), store.SweepRequest{Now: time.Time{}, Interval: 0, Limit: 10}); err == nil {
		t.Fatal("sweep with interval 0: no error")
	}
	if _, err := s.Sweep(t.Context(), store.SweepRequest{Now: time.Time{}, Interval: time.Second, Limit: 0}); err == nil {
		t.Fatal("sweep with limit 0: no error")
	}
}

func TestCanceledContext(t *testing.T) {
	s := memstore.New(clockwork.NewFakeClockAt(storetest.Start))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, _, err := s.Register(ctx, uuid.New(), info("calendar", 0), 0); err == nil {
		t.Fatal("register with a canceled context: no error")
	}
	if _, err := s.Sweep(ctx, store.SweepRequest{Now: time.Time{}, Interval: time.Second, Limit: 1}); err == nil {
		t.Fatal("sweep with a canceled context: no error")
	}
}

// A returned server is the caller's: changing it does not change the store.
func TestReturnedSlicesAreCopies(t *testing.T) {
	ctx := t.Context()
	s := memstore.New(clockwork.NewFakeClockAt(storetest.Start))
	tenant := uuid.New()
	srv, _, ev, err := s.Register(ctx, tenant, info("calendar", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.SupportedProtocols[0] = "changed"
	srv.CapabilityAdvertisement[0] = '['
	ev.Body.SupportedProtocols[0] = "changed"
	ev.Body.SkillsAffected[0] = "changed"
	got, err := s.Server(ctx, tenant, srv.ServerID)
	if err != nil {
		t.Fatal(err)
	}
	if got.SupportedProtocols[0] != "2025-06-18" || got.CapabilityAdvertisement[0] != '{' {
		t.Fatalf("store changed through a returned server: %v %s", got.SupportedProtocols, got.CapabilityAdvertisement)
	}
	page, err := s.Events(ctx, tenant, registry.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if b := page.Events[0].Body; b.SupportedProtocols[0] != "2025-06-18" || b.SkillsAffected[0] != "skill-0" {
		t.Fatalf("store changed through a returned event: %+v", b)
	}
}

func info(module string, skills int) registry.ServerInfo {
	in := registry.ServerInfo{
		ModuleName:              module,
		Version:                 "1.3.2",
		SupportedProtocols:      []string{"2025-06-18"},
		CapabilityAdvertisement: []byte(`{"tools":{"listChanged":true}}`),
		TraceID:                 registry.NewTraceID(),
	}
	for i := range skills {
		in.Skills = append(in.Skills, registry.SkillInfo{Name: fmt.Sprintf("skill-%d", i), Description: "a skill"})
	}
	return in
}

// fill registers n servers: n/100 tenants of 100 modules, 2 skills each, as
// the performance notes' fleet.
func fill(tb testing.TB, s *memstore.Store, n int) []registry.Server {
	tb.Helper()
	ctx := context.Background()
	out := make([]registry.Server, 0, n)
	var tenant uuid.UUID
	for i := range n {
		if i%100 == 0 {
			tenant = uuid.New()
		}
		srv, _, _, err := s.Register(ctx, tenant, info(fmt.Sprintf("module-%02d", i%100), 2), 0)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, srv)
	}
	return out
}

func BenchmarkHeartbeat(b *testing.B) {
	clock := clockwork.NewFakeClockAt(storetest.Start)
	s := memstore.New(clock)
	servers := fill(b, s, 10_000)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		srv := servers[i%len(servers)]
		if _, _, err := s.Heartbeat(ctx, srv.TenantID, srv.ServerID); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkHeartbeatParallel(b *testing.B) {
	clock := clockwork.NewFakeClockAt(storetest.Start)
	s := memstore.New(clock)
	servers := fill(b, s, 10_000)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			srv := servers[i%len(servers)]
			if _, _, err := s.Heartbeat(ctx, srv.TenantID, srv.ServerID); err != nil {
				b.Error(err)
				return
			}
			i += 7
		}
	})
}

// BenchmarkSweep100k sweeps 100,000 servers of which none is due.
func BenchmarkSweep100k(b *testing.B) {
	clock := clockwork.NewFakeClockAt(storetest.Start)
	s := memstore.New(clock)
	fill(b, s, 100_000)
	ctx := context.Background()
	clock.Advance(15 * time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		result, err := s.Sweep(ctx, store.SweepRequest{Now: time.Time{}, Interval: registry.DefaultHeartbeatInterval, Limit: lifecycle.DefaultSweepBatch})
		evs := result.Events
		if err != nil || len(evs) != 0 {
			b.Fatalf("sweep: %d transitions, %v", len(evs), err)
		}
	}
}

// BenchmarkHeap100k reports the live heap that 100,000 registered servers
// (each with two skills and its registration event) take.
func BenchmarkHeap100k(b *testing.B) {
	for b.Loop() {
		before := heapInUse()
		s := memstore.New(clockwork.NewFakeClockAt(storetest.Start))
		fill(b, s, 100_000)
		after := heapInUse()
		b.ReportMetric(float64(after-before)/1e6, "MB/100k-servers")
		b.ReportMetric(float64(after-before)/100_000, "B/server")
		runtime.KeepAlive(s)
	}
}

// TestHeap100k logs the same figure in an ordinary test run.
func TestHeap100k(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	before := heapInUse()
	s := memstore.New(clockwork.NewFakeClockAt(storetest.Start))
	fill(t, s, 100_000)
	after := heapInUse()
	runtime.KeepAlive(s)
	t.Logf("100,000 servers: %.1f MB of live heap (%.0f B per server)", float64(after-before)/1e6, float64(after-before)/100_000)
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
