package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// followed is a change feed that follows every tenant (or none), and has
// read every event (or has not: behind).
type followed struct{ none, behind atomic.Bool }

func (f *followed) Keep(uuid.UUID) bool { return !f.none.Load() }

func (f *followed) Current(context.Context, uuid.UUID) (bool, error) {
	return !f.none.Load() && !f.behind.Load(), nil
}

// heldStore is the memory store, counting the heartbeats that reach it and
// failing as a database that cannot write when told to.
type heldStore struct {
	*memstore.Store
	heartbeats atomic.Int64
	failing    atomic.Bool
	// failTenant, when set, is the one tenant whose writes fail (a Citus
	// worker that is down).
	failTenant atomic.Pointer[uuid.UUID]
	// busy, when set, is a server whose row another transaction holds:
	// its held heartbeat comes back busy.
	busy atomic.Pointer[uuid.UUID]
	// hangTenant, when set, is the one tenant whose writes hang until
	// their context ends (a Citus worker that hangs, or whose rows a
	// transaction left prepared holds).
	hangTenant atomic.Pointer[uuid.UUID]
	// block, when set, holds every write until it is closed; writes
	// counts the writes begun.
	block  atomic.Pointer[chan struct{}]
	writes atomic.Int64
	// onHeartbeat, when set, runs before a heartbeat is answered.
	onHeartbeat func()
	// skipped holds each sweep's SweepRequest.Skip.
	skipMu  sync.Mutex
	skipped [][]uuid.UUID
}

func (s *heldStore) Sweep(ctx context.Context, req store.SweepRequest) (store.SweepResult, error) {
	s.skipMu.Lock()
	s.skipped = append(s.skipped, req.Skip)
	s.skipMu.Unlock()
	if err := ctx.Err(); err != nil {
		return store.SweepResult{}, err // as a database's statement would
	}
	return s.Store.Sweep(ctx, req)
}

func (s *heldStore) lastSkip() []uuid.UUID {
	s.skipMu.Lock()
	defer s.skipMu.Unlock()
	return s.skipped[len(s.skipped)-1]
}

func (s *heldStore) Heartbeat(ctx context.Context, tenant, id uuid.UUID) (registry.Server, *registry.Event, error) {
	s.heartbeats.Add(1)
	if s.failing.Load() {
		return registry.Server{}, nil, registry.ErrUnavailable
	}
	srv, ev, err := s.Store.Heartbeat(ctx, tenant, id)
	if s.onHeartbeat != nil {
		s.onHeartbeat()
	}
	return srv, ev, err
}

func (s *heldStore) WriteHeldHeartbeats(ctx context.Context, tenant uuid.UUID, beats []store.HeldHeartbeat) ([]store.HeldOutcome, error) {
	s.writes.Add(1)
	if b := s.block.Load(); b != nil {
		<-*b
	}
	if h := s.hangTenant.Load(); h != nil && *h == tenant {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f := s.failTenant.Load(); s.failing.Load() || f != nil && *f == tenant {
		return nil, registry.ErrUnavailable
	}
	if b := s.busy.Load(); b != nil {
		var rest []store.HeldHeartbeat
		var outs []store.HeldOutcome
		for _, hb := range beats {
			if hb.ServerID == *b {
				outs = append(outs, store.HeldOutcome{ServerID: hb.ServerID, Err: store.ErrBusy})
			} else {
				rest = append(rest, hb)
			}
		}
		more, err := s.Store.WriteHeldHeartbeats(ctx, tenant, rest)
		return append(outs, more...), err
	}
	return s.Store.WriteHeldHeartbeats(ctx, tenant, beats)
}

const flushWindow = 500 * time.Millisecond

type heldEnv struct {
	t      *testing.T
	ctx    context.Context
	clock  *clockwork.FakeClock
	store  *heldStore
	feed   *followed
	sink   *recorder
	reg    *lifecycle.Registrar
	tenant uuid.UUID
}

func newHeldEnv(t *testing.T, maxHeld int) *heldEnv {
	clock := clockwork.NewFakeClockAt(start)
	e := &heldEnv{t: t, ctx: t.Context(), clock: clock, store: &heldStore{Store: memstore.New(clock)},
		feed: &followed{}, sink: &recorder{}, tenant: uuid.New()}
	e.reg = lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: e.store, Sink: e.sink, Clock: clock,
		FlushInterval: flushWindow, Feed: e.feed, MaxHeld: maxHeld})
	if !e.reg.Holding() {
		t.Fatal("the Registrar does not hold heartbeats")
	}
	return e
}

func (e *heldEnv) register(module string) registry.Server {
	e.t.Helper()
	srv, _, err := e.reg.Register(e.ctx, e.tenant, registry.ServerInfo{ModuleName: module, Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "search"}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return srv
}

func (e *heldEnv) heartbeat(id uuid.UUID) registry.Server {
	e.t.Helper()
	srv, err := e.reg.Heartbeat(e.ctx, e.tenant, id)
	if err != nil {
		e.t.Fatalf("heartbeat: %v", err)
	}
	return srv
}

// wantStoreCalls fails unless n heartbeats reached the store so far.
func (e *heldEnv) wantStoreCalls(n int64) {
	e.t.Helper()
	if got := e.store.heartbeats.Load(); got != n {
		e.t.Fatalf("%d heartbeats reached the store, want %d", got, n)
	}
}

func (e *heldEnv) stored(id uuid.UUID) registry.Server {
	e.t.Helper()
	srv, err := e.store.Server(e.ctx, e.tenant, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return srv
}

func (e *heldEnv) flush() {
	e.t.Helper()
	if err := e.reg.Flush(e.ctx); err != nil {
		e.t.Fatalf("flush: %v", err)
	}
}

func TestHeldHeartbeatAnsweredFromMemory(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	first := e.heartbeat(srv.ServerID) // learnt from the store's answer
	e.wantStoreCalls(1)

	e.clock.Advance(10 * time.Second)
	got := e.heartbeat(srv.ServerID)
	e.wantStoreCalls(1)
	if got.Status != registry.StatusHealthy || !got.LastHeartbeatAt.Equal(e.clock.Now()) || got.ModuleName != "calendar" ||
		got.HeartbeatIntervalSecs != 10 {
		t.Fatalf("answer from memory: %+v", got)
	}
	// Not yet in the store; the Registrar's reads show it already.
	if at := e.stored(srv.ServerID).LastHeartbeatAt; !at.Equal(first.LastHeartbeatAt) {
		t.Fatalf("stored before the flush: %s, want %s", at, first.LastHeartbeatAt)
	}
	if read, err := e.reg.Server(e.ctx, e.tenant, srv.ServerID); err != nil || !read.LastHeartbeatAt.Equal(got.LastHeartbeatAt) {
		t.Fatalf("Registrar.Server before the flush: %+v %v", read, err)
	}
	page, err := e.reg.Servers(e.ctx, e.tenant, registry.ServerFilter{Limit: 10})
	if err != nil || len(page.Servers) != 1 || !page.Servers[0].LastHeartbeatAt.Equal(got.LastHeartbeatAt) {
		t.Fatalf("Registrar.Servers before the flush: %+v %v", page, err)
	}
	// Written at the time it was received, not the flush's.
	e.clock.Advance(300 * time.Millisecond)
	e.flush()
	if at := e.stored(srv.ServerID).LastHeartbeatAt; !at.Equal(got.LastHeartbeatAt) {
		t.Fatalf("stored after the flush: %s, want %s", at, got.LastHeartbeatAt)
	}
	if kinds := e.sink.kinds(); len(kinds) != 1 || kinds[0] != registry.KindRegistered {
		t.Fatalf("transitions %v, want only the registration", kinds)
	}
}

func TestHeldHeartbeatForgetsWhatTheFeedReads(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	e.heartbeat(srv.ServerID)
	// Another replica deregisters it; the feed reads the event.
	_, ev, err := e.store.Deregister(e.ctx, e.tenant, srv.ServerID)
	if err != nil || ev == nil {
		t.Fatal(err)
	}
	e.reg.Read(*ev)
	if _, err := e.reg.Heartbeat(e.ctx, e.tenant, srv.ServerID); !errors.Is(err, registry.ErrDeregistered) {
		t.Fatalf("heartbeat after a deregistration the feed read: %v, want ErrDeregistered", err)
	}
	e.wantStoreCalls(2)
}

func TestHeldHeartbeatOfServerDeregisteredBeforeTheFeedSaw(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	e.heartbeat(srv.ServerID)
	if _, _, err := e.store.Deregister(e.ctx, e.tenant, srv.ServerID); err != nil {
		t.Fatal(err)
	}
	// Within the feed's delay the heartbeat is held; its flush finds the
	// server deregistered, writes nothing and forgets it.
	e.heartbeat(srv.ServerID)
	e.flush()
	if _, err := e.reg.Heartbeat(e.ctx, e.tenant, srv.ServerID); !errors.Is(err, registry.ErrDeregistered) {
		t.Fatalf("heartbeat after the flush: %v, want ErrDeregistered", err)
	}
	if st := e.stored(srv.ServerID).Status; st != registry.StatusDeregistered {
		t.Fatalf("status %s", st)
	}
}

func TestHeldOnlyWhileTheFeedFollows(t *testing.T) {
	e := newHeldEnv(t, 0)
	e.feed.none.Store(true)
	srv := e.register("calendar")
	for range 3 {
		e.heartbeat(srv.ServerID)
	}
	e.wantStoreCalls(3)
	// An event of the tenant read between the store's answer and the
	// learning: not learnt.
	e.feed.none.Store(false)
	other := e.register("mail")
	e.store.onHeartbeat = func() {
		e.reg.Read(registry.Event{TenantID: e.tenant, ServerID: other.ServerID, Kind: registry.KindDegraded})
	}
	e.heartbeat(srv.ServerID)
	e.store.onHeartbeat = nil
	e.heartbeat(srv.ServerID)
	e.wantStoreCalls(5)
	e.heartbeat(srv.ServerID) // learnt by the one before
	e.wantStoreCalls(5)
	// The feed forgetting the tenant forgets its servers.
	e.reg.Forget(e.tenant)
	e.heartbeat(srv.ServerID)
	e.wantStoreCalls(6)
	e.reg.Forget(uuid.Nil)
	e.heartbeat(srv.ServerID)
	e.wantStoreCalls(7)
}

// A heartbeat is held only when the feed has read every event of the
// tenant committed before it: another replica's deregistration or sweep
// that the feed has not read yet sends it to the store.
func TestHeldOnlyWhenTheFeedIsCurrent(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	e.heartbeat(srv.ServerID)
	e.heartbeat(srv.ServerID)
	e.wantStoreCalls(1)
	e.feed.behind.Store(true)
	if _, _, err := e.store.Deregister(e.ctx, e.tenant, srv.ServerID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reg.Heartbeat(e.ctx, e.tenant, srv.ServerID); !errors.Is(err, registry.ErrDeregistered) {
		t.Fatalf("heartbeat with the feed behind a deregistration: %v, want ErrDeregistered", err)
	}
	e.wantStoreCalls(2)
}

func TestHeldFlushRecoversServerSweptMeanwhile(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	e.heartbeat(srv.ServerID)
	// Another replica's sweep, which this replica's feed has not read.
	e.clock.Advance(35 * time.Second)
	res, err := e.store.Sweep(e.ctx, store.SweepRequest{Interval: registry.DefaultHeartbeatInterval, Limit: 10})
	if err != nil || len(res.Events) != 1 || res.Events[0].Kind != registry.KindUnhealthy {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	e.heartbeat(srv.ServerID)
	e.flush()
	if kinds := e.sink.kinds(); len(kinds) != 2 || kinds[1] != registry.KindRecovered {
		t.Fatalf("transitions %v, want the recovery after the registration", kinds)
	}
	if got := e.stored(srv.ServerID); got.Status != registry.StatusHealthy {
		t.Fatalf("after the flush: %s", got.Status)
	}
	skills, err := e.store.Skills(e.ctx, e.tenant, srv.ServerID)
	if err != nil || !skills[0].Available {
		t.Fatalf("skills after the recovery: %+v %v", skills, err)
	}
}

func TestHeldFailedFlushTurnsHoldingOff(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	e.heartbeat(srv.ServerID)
	e.clock.Advance(time.Second)
	held := e.heartbeat(srv.ServerID)
	e.wantStoreCalls(1)

	e.store.failing.Store(true)
	if err := e.reg.Flush(e.ctx); !errors.Is(err, registry.ErrUnavailable) {
		t.Fatalf("flush with the store down: %v", err)
	}
	// Never acknowledged from memory once a write failed.
	for range 3 {
		e.clock.Advance(time.Second)
		if _, err := e.reg.Heartbeat(e.ctx, e.tenant, srv.ServerID); !errors.Is(err, registry.ErrUnavailable) {
			t.Fatalf("heartbeat after a failed flush: %v, want ErrUnavailable", err)
		}
	}
	e.wantStoreCalls(4)

	// Back: the kept heartbeat is written with its own time.
	e.store.failing.Store(false)
	e.flush()
	if at := e.stored(srv.ServerID).LastHeartbeatAt; !at.Equal(held.LastHeartbeatAt) {
		t.Fatalf("kept heartbeat stored at %s, want %s", at, held.LastHeartbeatAt)
	}
	// A write succeeded: holding is on again.
	e.heartbeat(srv.ServerID)
	e.wantStoreCalls(4)
}

// A write that fails for one tenant (its Citus worker down) stops holding
// for that tenant only.
func TestHeldWriteFailureOfOneTenant(t *testing.T) {
	e := newHeldEnv(t, 0)
	down := e.register("calendar")
	e.heartbeat(down.ServerID)
	up := e.tenant
	e.tenant = uuid.New()
	other := e.register("mail")
	e.heartbeat(other.ServerID)
	e.wantStoreCalls(2)
	e.heartbeat(other.ServerID)
	e.tenant = up
	e.heartbeat(down.ServerID)
	e.wantStoreCalls(2)

	e.store.failTenant.Store(&up)
	// The other tenant's write succeeded: the flush does not fail (the
	// monitor sweeps on).
	if err := e.reg.Flush(e.ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	e.heartbeat(down.ServerID) // to the store, which answers for it here
	e.wantStoreCalls(3)
	e.tenant = other.TenantID
	e.heartbeat(other.ServerID) // still held
	e.wantStoreCalls(3)
}

// A heartbeat whose row another transaction held comes back busy: kept
// for the next flush, which writes it; the server stays known.
func TestHeldBusyRowWrittenByTheNextFlush(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	e.heartbeat(srv.ServerID)
	e.clock.Advance(time.Second)
	held := e.heartbeat(srv.ServerID)
	e.store.busy.Store(&srv.ServerID)
	e.flush()
	if at := e.stored(srv.ServerID).LastHeartbeatAt; at.Equal(held.LastHeartbeatAt) {
		t.Fatal("a busy row was written")
	}
	e.store.busy.Store(nil)
	e.flush()
	if at := e.stored(srv.ServerID).LastHeartbeatAt; !at.Equal(held.LastHeartbeatAt) {
		t.Fatalf("after the next flush: %s, want %s", at, held.LastHeartbeatAt)
	}
	e.heartbeat(srv.ServerID)
	e.wantStoreCalls(1)
}

// A flush held up past a window (a lock, a database that stalls) sends
// every heartbeat to the store until it ends: none waits behind it past
// the sweep's grace.
func TestHeldStuckFlushSendsHeartbeatsToTheStore(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	e.heartbeat(srv.ServerID)
	e.heartbeat(srv.ServerID) // held
	block := make(chan struct{})
	e.store.block.Store(&block)
	done := make(chan error, 1)
	go func() { done <- e.reg.Flush(e.ctx) }()
	testwait.Eventually(t, "the flush under way", func() bool { return e.store.writes.Load() == 1 })
	e.clock.Advance(flushWindow + time.Millisecond)
	e.heartbeat(srv.ServerID)
	e.wantStoreCalls(2)
	close(block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.store.block.Store(nil)
	e.heartbeat(srv.ServerID) // held again
	e.wantStoreCalls(2)
}

func TestHeldHeartbeatsBounded(t *testing.T) {
	e := newHeldEnv(t, 1)
	a, b := e.register("a"), e.register("b")
	e.heartbeat(a.ServerID)
	e.heartbeat(b.ServerID)
	e.heartbeat(a.ServerID) // held: the one place
	e.heartbeat(a.ServerID) // the same server again: still one
	e.wantStoreCalls(2)
	e.heartbeat(b.ServerID) // no room: to the store
	e.wantStoreCalls(3)
	e.flush()
	e.heartbeat(b.ServerID)
	e.wantStoreCalls(3)
}

// A heartbeat held before the 2I boundary and not yet written never
// yields degraded when another replica sweeps: the sweep allows two
// windows; without the grace it would.
func TestNoFalseTransitionFromTheFlushWindow(t *testing.T) {
	for _, c := range []struct {
		name         string
		grace        time.Duration
		wantDegraded bool
	}{
		{"with the grace", lifecycle.SweepGrace(flushWindow), false},
		{"without it", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newHeldEnv(t, 0)
			srv := e.register("calendar")
			e.heartbeat(srv.ServerID)
			other := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: e.store, Clock: e.clock,
				HeartbeatInterval: registry.DefaultHeartbeatInterval, BlindAfter: -1, Grace: c.grace})
			e.clock.Advance(2*registry.DefaultHeartbeatInterval - 100*time.Millisecond)
			e.heartbeat(srv.ServerID) // held, written at the next flush
			e.clock.Advance(flushWindow + 100*time.Millisecond)
			evs, err := other.Sweep(e.ctx, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if degraded := len(evs) == 1 && evs[0].Kind == registry.KindDegraded; degraded != c.wantDegraded || len(evs) > 1 {
				t.Fatalf("sweep before the flush: %v, want degraded %v", kindsOf(evs), c.wantDegraded)
			}
		})
	}
}

// monitor returns a monitor of e's store that writes e's held heartbeats
// before each sweep and skips the tenants they were not written for.
func (e *heldEnv) monitor() *lifecycle.Monitor {
	return lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: e.store, Clock: e.clock,
		HeartbeatInterval: registry.DefaultHeartbeatInterval, BlindAfter: -1,
		BeforeSweep: e.reg.Flush, Unwritten: e.reg.Unwritten})
}

// The monitor writes its own replica's held heartbeats before it sweeps.
func TestMonitorFlushesBeforeSweep(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	e.heartbeat(srv.ServerID)
	m := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: e.store, Clock: e.clock,
		HeartbeatInterval: registry.DefaultHeartbeatInterval, BlindAfter: -1, BeforeSweep: e.reg.Flush})
	e.clock.Advance(2*registry.DefaultHeartbeatInterval - 100*time.Millisecond)
	e.heartbeat(srv.ServerID)
	e.clock.Advance(5 * time.Second)
	if evs, err := m.Sweep(e.ctx, time.Time{}); err != nil || len(evs) != 0 {
		t.Fatalf("sweep: %v %v, want nothing", kindsOf(evs), err)
	}
	// A flush that fails is logged and the sweep runs: the store that
	// cannot take the heartbeats cannot take the sweep's writes either.
	e.clock.Advance(time.Second)
	e.heartbeat(srv.ServerID) // held
	e.store.failing.Store(true)
	e.clock.Advance(time.Second)
	if _, err := m.Sweep(e.ctx, time.Time{}); err != nil {
		t.Fatalf("sweep with a failing flush: %v", err)
	}
}

// A write before the sweep that hangs on one tenant (its Citus worker
// just back, its rows still locked) takes half of the sweep's time at
// most: the tenant it left unwritten is skipped, and the others are swept
// in the half left. It used to take the whole, and after a worker's
// return some sweeps failed whole in the same millisecond as their write
// (black-box runs, 2026-12-07 18:05 and 20:28 UTC).
func TestMonitorSweepsWhenTheWriteBeforeItHangs(t *testing.T) {
	e := newHeldEnv(t, 0)
	hung := e.register("calendar")
	e.heartbeat(hung.ServerID)
	e.tenant = uuid.New()
	silent := e.register("mail")
	m := e.monitor()
	e.clock.Advance(registry.DegradedAfter(registry.DefaultHeartbeatInterval) + 5*time.Second)
	e.tenant = hung.TenantID
	e.heartbeat(hung.ServerID) // held; its write hangs
	e.store.hangTenant.Store(&hung.TenantID)
	// A sweep's time is real: the context's deadline.
	ctx, cancel := context.WithTimeout(e.ctx, 400*time.Millisecond)
	defer cancel()
	evs, err := m.Sweep(ctx, time.Time{})
	if err != nil {
		t.Fatalf("sweep after a write that hung: %v", err)
	}
	// The memory store does not skip (its writes do not fail); the tenant
	// it was told to skip is checked below.
	if !slices.ContainsFunc(evs, func(ev registry.Event) bool {
		return ev.ServerID == silent.ServerID && ev.Kind == registry.KindDegraded
	}) {
		t.Fatalf("sweep: %v, want the other tenant's silent server degraded", kindsOf(evs))
	}
	if got := e.store.lastSkip(); len(got) != 1 || got[0] != hung.TenantID {
		t.Fatalf("sweep skipped %v; want the tenant whose write hung, %s", got, hung.TenantID)
	}
}

// A flush that waits for the flush under way (held up on a worker) gives
// up when its context ends, instead of waiting for that flush to end: the
// sweep's own flush is bounded by its share of the sweep's time.
func TestHeldFlushWaitsForTheFlushUnderWayWithinItsContext(t *testing.T) {
	e := newHeldEnv(t, 0)
	srv := e.register("calendar")
	e.heartbeat(srv.ServerID)
	e.clock.Advance(time.Second)
	e.heartbeat(srv.ServerID) // held
	block := make(chan struct{})
	e.store.block.Store(&block)
	under := make(chan error, 1)
	go func() { under <- e.reg.Flush(e.ctx) }()
	testwait.Eventually(t, "the first flush's write to begin", func() bool { return e.store.writes.Load() == 1 })
	ctx, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- e.reg.Flush(ctx) }()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("flush behind one under way: %v, want its context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("a flush behind one under way did not return when its context ended")
	}
	close(block)
	if err := <-under; err != nil {
		t.Fatalf("the flush under way: %v", err)
	}
}

// A tenant whose held heartbeats were answered and could not be written
// (its Citus worker hangs or is down) is not swept: the store's heartbeat
// times of its servers are older than what they were told, and a sweep's
// call sent to a worker that hangs runs when it thaws. Once its heartbeats
// are written, it is swept again.
func TestMonitorSkipsTenantsWithUnwrittenHeartbeats(t *testing.T) {
	e := newHeldEnv(t, 0)
	down := e.register("calendar")
	e.heartbeat(down.ServerID)
	e.tenant = uuid.New()
	up := e.register("mail")
	e.heartbeat(up.ServerID)
	m := e.monitor()
	e.clock.Advance(time.Second)
	e.heartbeat(up.ServerID) // held
	e.tenant = down.TenantID
	e.heartbeat(down.ServerID) // held
	e.store.failTenant.Store(&down.TenantID)
	if _, err := m.Sweep(e.ctx, time.Time{}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if got := e.store.lastSkip(); len(got) != 1 || got[0] != down.TenantID {
		t.Fatalf("sweep skipped %v; want the tenant whose write failed, %s", got, down.TenantID)
	}
	// Still failing once its kept heartbeat is older than 3I and the
	// grace: it could not keep a server from being marked any more, and
	// the tenant is swept, so that its dead servers move.
	e.clock.Advance(registry.UnhealthyAfter(registry.DefaultHeartbeatInterval))
	if _, err := m.Sweep(e.ctx, time.Time{}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if got := e.store.lastSkip(); len(got) != 0 {
		t.Fatalf("sweep 3I after the kept heartbeat skipped %v; want none", got)
	}
	e.store.failTenant.Store(nil)
	e.heartbeat(down.ServerID)
	if _, err := m.Sweep(e.ctx, time.Time{}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if got := e.store.lastSkip(); len(got) != 0 {
		t.Fatalf("sweep after the write succeeded skipped %v; want none", got)
	}
}

// A flush that fails for some tenants (a stopped Citus worker) repeats on
// every flush while the fault lasts: it is logged once per ten seconds,
// with how many flushes the record stands for.
func TestHeldPartialFlushLoggedOncePerInterval(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	logs := &testlog.Buffer{}
	st := &heldStore{Store: memstore.New(clock)}
	var partial atomic.Int64
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: st, Sink: &recorder{}, Clock: clock,
		FlushInterval: flushWindow, Feed: &followed{}, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		OnFlush: func(s lifecycle.FlushStats) {
			if s.Failed > 0 && s.Failed < s.Calls {
				partial.Add(1)
			}
		}})
	e := &heldEnv{t: t, ctx: t.Context(), clock: clock, store: st, feed: &followed{}, sink: &recorder{}, reg: reg,
		tenant: uuid.New()}
	down := e.register("calendar")
	e.tenant = uuid.New()
	up := e.register("mail")
	st.failTenant.Store(&down.TenantID)
	// Each round holds a heartbeat of each tenant (the stopped tenant's
	// first goes to the store, which answers it, and clears its failing
	// mark), then flushes.
	round := func() {
		for _, srv := range []registry.Server{down, up} {
			e.tenant = srv.TenantID
			e.heartbeat(srv.ServerID)
			e.heartbeat(srv.ServerID)
		}
		if err := reg.Flush(e.ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		clock.Advance(flushWindow)
	}
	records := func() []string { return logs.Lines("write failed for some tenants") }
	for range 20 { // flushes at 0 to 9.5 s
		round()
	}
	if n := partial.Load(); n < 10 {
		t.Fatalf("%d flushes failed for one tenant of two, want at least 10", n)
	}
	if got := records(); len(got) != 1 || strings.Contains(got[0], `"suppressed"`) {
		t.Fatalf("%d flushes failed for some tenants within 10 s: %d records, want 1 without suppressed:\n%s",
			partial.Load(), len(got), strings.Join(got, "\n"))
	}
	before := partial.Load()
	round() // 10 s after the first
	if got, want := records(), fmt.Sprintf(`"suppressed":%d`, before-1); len(got) != 2 || !strings.Contains(got[1], want) {
		t.Fatalf("10 s later: %d records, want 2, the second with %s:\n%s", len(got), want, strings.Join(got, "\n"))
	}
}

// A flush that fails for every tenant it writes (its heartbeats are all
// of a stopped Citus worker's tenants) is logged once per ten seconds
// too: the store's answer to one of the tenant's heartbeats between two
// flushes turns holding back on, so the warning was logged on every
// flush (99 in 30 s in a black-box run).
func TestHeldFailedFlushLoggedOncePerInterval(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	logs := &testlog.Buffer{}
	st := &heldStore{Store: memstore.New(clock)}
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: st, Sink: &recorder{}, Clock: clock,
		FlushInterval: flushWindow, Feed: &followed{}, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	e := &heldEnv{t: t, ctx: t.Context(), clock: clock, store: st, feed: &followed{}, sink: &recorder{}, reg: reg,
		tenant: uuid.New()}
	down := e.register("calendar")
	st.failTenant.Store(&down.TenantID)
	records := func() []string { return logs.Lines("held heartbeats: write failed; heartbeats go to the store") }
	failed := 0
	for range 21 { // flushes from 0 to 10 s
		e.heartbeat(down.ServerID) // to the store after a failed write: holding on again
		e.heartbeat(down.ServerID) // held
		if err := reg.Flush(e.ctx); err != nil {
			failed++
		}
		clock.Advance(flushWindow)
	}
	if failed < 20 {
		t.Fatalf("%d of 21 flushes failed, want at least 20", failed)
	}
	if got := records(); len(got) != 2 || strings.Contains(got[0], `"suppressed"`) || !strings.Contains(got[1], `"suppressed":`) {
		t.Fatalf("%d failed flushes over 10 s: %d records, want 2, the second with suppressed:\n%s", failed, len(got), strings.Join(got, "\n"))
	}
}
