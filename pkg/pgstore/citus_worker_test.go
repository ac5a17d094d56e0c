package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// A worker of the Citus cluster stops for 30 s (of the store's clock):
// its tenant's heartbeats fail as unavailable (503) and its servers are
// not swept, while the other worker's tenant heartbeats, its trail is
// read by the feed, and its silent
// server goes degraded then unhealthy on time. When the worker returns,
// the stopped tenant's servers get their full intervals again (its own
// blind window): no false transition, and every tenant's trail has each
// event once, at gapless positions.
func TestCitusStoppedWorker(t *testing.T) {
	c, db, clock, st := privateCitusStore(t)
	ctx := t.Context()

	// A tenant on each worker.
	tenants := c.TenantOnEachWorker(t, db)
	stopped, other := tenants[0], tenants[1]
	reg := func(tenant uuid.UUID, module string) registry.Server { return register(t, st, tenant, module) }
	a := reg(stopped, "alpha")
	b := reg(other, "bravo")
	reg(other, "silent")
	const interval = 10 * time.Second
	sweep := func() (store.SweepResult, error) {
		return st.Sweep(ctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100, BlindAfter: 2 * interval})
	}
	if _, err := sweep(); err != nil {
		t.Fatal(err)
	}
	// A second replica whose every sweep so far found another sweeping
	// (the guard's row locked) still learns the tenants, so that it
	// sweeps the running worker's once the other worker stops.
	late := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(late.Close)
	lateSweep := func() (store.SweepResult, error) {
		return late.Sweep(ctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100, BlindAfter: 2 * interval})
	}
	held, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctx, `SELECT 1 FROM mcp_monitor_state FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	if res, err := lateSweep(); err != nil || len(res.Events) != 0 {
		t.Fatalf("a sweep while another holds the guard: %+v, %v; want nothing", res.Events, err)
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	c.Workers[0].Stop(t)
	var partial *registry.PartialError
	if _, err := lateSweep(); !errors.As(err, &partial) || partial.Failed != 1 {
		t.Fatalf("the second replica's first sweep with a worker down: %v; want the stopped worker's tenant failed alone", err)
	}
	// The feed reads the running worker's tenant and names the other.
	batches, err := st.ReadFeed(ctx, []uuid.UUID{stopped, other}, []registry.Position{{}, {}}, 100)
	if !errors.Is(err, registry.ErrUnavailable) || len(batches) != 1 || batches[0].Tenant != other ||
		len(batches[0].Events) != 2 {
		t.Fatalf("feed read with a worker down: %d batches %+v, %v; want the running worker's tenant's 2 events and ErrUnavailable",
			len(batches), batches, err)
	}
	// Every read of the running worker's tenant answers: each names the
	// tenant, so that Citus routes it to the tenant's shard alone.
	for name, read := range map[string]func() error{
		"server":      func() error { _, err := st.Server(ctx, other, b.ServerID); return err },
		"skills":      func() error { _, err := st.Skills(ctx, other, b.ServerID); return err },
		"servers":     func() error { _, err := st.Servers(ctx, other, registry.ServerFilter{Limit: 10}); return err },
		"events":      func() error { _, err := st.Events(ctx, other, registry.EventFilter{Limit: 10}); return err },
		"find skills": func() error { _, err := st.FindSkills(ctx, other, registry.SkillFilter{Limit: 10}); return err },
		"catalog":     func() error { _, err := st.Catalog(ctx, other, registry.CatalogFilter{Limit: 10}); return err },
		"availability": func() error {
			_, err := st.ServerAvailability(ctx, other, b.ServerID, registry.AvailabilityRequest{Window: registry.Window24h})
			return err
		},
		"ratios": func() error {
			_, err := st.AvailabilityRatios(ctx, other, []uuid.UUID{b.ServerID}, registry.AvailabilityRequest{Window: registry.Window24h})
			return err
		},
	} {
		if err := read(); err != nil {
			t.Fatalf("%s of the running worker's tenant with the other worker down: %v", name, err)
		}
	}
	// So does a deregistration (and a registration) of the running
	// worker's tenant.
	gone := reg(other, "gone")
	if _, ev, err := st.Deregister(ctx, other, gone.ServerID); err != nil || ev == nil {
		t.Fatalf("deregister on the running worker with the other down: %v", err)
	}
	var otherEvents []registry.Event
	for range 6 { // 30 s
		clock.Advance(5 * time.Second)
		if _, _, err := st.Heartbeat(ctx, other, b.ServerID); err != nil {
			t.Fatalf("heartbeat on the running worker: %v", err)
		}
		if _, _, err := st.Heartbeat(ctx, stopped, a.ServerID); !errors.Is(err, registry.ErrUnavailable) {
			t.Fatalf("heartbeat on the stopped worker: %v, want ErrUnavailable", err)
		}
		res, err := sweep()
		if !errors.Is(err, registry.ErrUnavailable) {
			t.Fatalf("sweep with a worker down: %v, want ErrUnavailable (of the stopped worker's tenant)", err)
		}
		otherEvents = append(otherEvents, res.Events...)
	}
	if len(otherEvents) != 2 || otherEvents[0].ModuleName != "silent" || otherEvents[0].Kind != registry.KindDegraded ||
		otherEvents[1].Kind != registry.KindUnhealthy {
		t.Fatalf("the running worker's sweeps: %+v, want silent degraded then unhealthy", otherEvents)
	}

	// Batches that hold both workers' tenants at once: the stopped
	// worker's failure answers its own tenant's heartbeats only; the
	// running worker's answer each as they would alone.
	type beat struct {
		tenant, server uuid.UUID
		want           error
	}
	beats := []beat{{stopped, a.ServerID, registry.ErrUnavailable}, {other, b.ServerID, nil},
		{other, uuid.New(), registry.ErrNotFound}, {other, gone.ServerID, registry.ErrDeregistered}}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	for round := range 25 {
		for _, bt := range beats {
			wg.Go(func() {
				_, _, err := st.Heartbeat(ctx, bt.tenant, bt.server)
				if !errors.Is(err, bt.want) {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("round %d, heartbeat of %s: %v, want %v", round, bt.server, err, bt.want))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}

	c.Workers[0].Start(t)
	clock.Advance(time.Second)
	var res store.SweepResult
	testwait.Poll(t, "a sweep after the worker returned", testwait.Cap, func() (err error) {
		res, err = sweep()
		return err
	})
	if len(res.Events) != 0 {
		t.Fatalf("sweep after the worker returned: %+v, want no transition", res.Events)
	}
	if _, _, err := st.Heartbeat(ctx, stopped, a.ServerID); err != nil {
		t.Fatalf("heartbeat after the worker returned: %v", err)
	}
	clock.Advance(15 * time.Second)
	if res, err := sweep(); err != nil || len(res.Events) != 0 {
		t.Fatalf("sweep 15 s later: %+v, %v; want no transition", res.Events, err)
	}
	for tenant, want := range map[uuid.UUID]int{stopped: 1, other: 6} {
		page, err := st.Events(ctx, tenant, registry.EventFilter{Limit: 100})
		if err != nil || len(page.Events) != want {
			t.Fatalf("trail of %s: %d events, %v; want %d", tenant, len(page.Events), err, want)
		}
		for i, ev := range page.Events {
			if ev.Position.Seq != int64(i+1) {
				t.Fatalf("trail of %s: event %d at %+v", tenant, i, ev.Position)
			}
		}
	}
}

// A worker that hangs (its processes stopped with SIGSTOP: connections
// accepted and never answered) instead of refusing connections, for 8 s
// of the store's clock (I = 4 s): each sweep, given 6 s, still sweeps the
// other worker's tenant (its silent server degraded, then unhealthy, on
// time) and answers a partial failure before its deadline, instead of
// running out of time on the hung worker's first call, which made every
// sweep fail and /readyz say not ready on every replica. After the thaw
// the hung worker's tenant gets its full intervals again: nothing moves.
func TestCitusHungWorker(t *testing.T) {
	c, db, clock, st := privateCitusStore(t)
	ctx := t.Context()
	tenants := c.TenantOnEachWorker(t, db)
	running, frozen := tenants[0], tenants[1]
	alive := register(t, st, running, "alive")
	register(t, st, running, "silent")
	still := register(t, st, frozen, "still")
	const interval = 4 * time.Second
	// A sweep's time as mcpd gives it at an interval of 6 s.
	sweep := func() (store.SweepResult, error) {
		sctx, cancel := context.WithTimeout(ctx, 6*time.Second)
		defer cancel()
		return st.Sweep(sctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100, BlindAfter: 2 * interval})
	}
	beat := func(tenant, server uuid.UUID) {
		t.Helper()
		if _, _, err := st.Heartbeat(ctx, tenant, server); err != nil {
			t.Fatal(err)
		}
	}
	step := func() {
		t.Helper()
		clock.Advance(interval / 2)
		beat(running, alive.ServerID)
	}
	if _, err := sweep(); err != nil {
		t.Fatal(err)
	}
	for range 3 { // 6 s
		step()
		beat(frozen, still.ServerID)
		if res, err := sweep(); err != nil || len(res.Events) != 0 {
			t.Fatalf("sweep: %+v, %v; want nothing moved yet", res.Events, err)
		}
	}

	c.Workers[1].Freeze(t)
	for i := range 4 { // 8 s: degraded at 2I, unhealthy at 3I
		step()
		sweepUntil(t, fmt.Sprintf("a sweep that fails the hung worker's tenant alone (step %d)", i), sweep, func(err error) bool {
			var partial *registry.PartialError
			return errors.As(err, &partial) && partial.Failed == 1
		})
	}
	if moved := trailMoves(t, st, running); moved != silentMoves {
		t.Fatalf("the running worker's sweeps: %s, want %s", moved, silentMoves)
	}
	// The positions of both workers' tenants in one call: the hung
	// worker's tenant fails alone, once the stall time has passed.
	want, err := st.Horizon(ctx, running)
	if err != nil || want.Seq != 4 {
		t.Fatalf("the running tenant's position %v, %v; want its 4 events", want, err)
	}
	start := time.Now()
	positions, errs := st.Horizons(ctx, tenants)
	if took := time.Since(start); errs[0] != nil || positions[0] != want || !errors.Is(errs[1], pgstore.ErrWorkerStalled) ||
		took >= pgstore.DefaultWorkerStall+5*time.Second {
		t.Fatalf("Horizons with a worker hung: %v, %v after %v; want %v for the running tenant and the hung one's ErrWorkerStalled within the stall time",
			positions, errs, took, want)
	}
	// NodeHorizons, for a caller that bounds its callers' wait itself,
	// reads the running worker's tenant, and waits for the hung one's
	// read until the caller's context ends, not the stall time (of a
	// store of its own here, with a stall time shorter than that wait,
	// so that this store's calls stay as they were).
	if got, errs := st.NodeHorizons(ctx, st.TenantNode(ctx, running), tenants[:1]); errs[0] != nil || got[0] != want {
		t.Fatalf("NodeHorizons of the running tenant with the other worker hung: %v, %v; want %v", got, errs, want)
	}
	const shortStall, callerWait = 200 * time.Millisecond, 600 * time.Millisecond
	short := pgstore.New(db.App, pgstore.Options{WorkerStall: shortStall})
	defer short.Close()
	hungNode := st.TenantNode(ctx, frozen)
	if hungNode < 0 {
		t.Fatal("the hung tenant's node is not known")
	}
	nctx, cancel := context.WithTimeout(ctx, callerWait)
	start = time.Now()
	_, errs = short.NodeHorizons(nctx, hungNode, tenants[1:])
	cancel()
	if took := time.Since(start); errs[0] == nil || took < callerWait {
		t.Fatalf("NodeHorizons of the hung tenant: %v after %v; want an error once the caller's %v ended, past the stall time %v",
			errs[0], took, callerWait, shortStall)
	}
	c.Workers[1].Thaw(t)

	// Just thawed, the worker may still fail a first call (in flight
	// when it stopped) or two: what is asked is that no sweep moves
	// anything, and that one sweeps both tenants whole.
	testwait.Until(t, "the hung worker answering after the thaw", testwait.Cap, func() bool {
		_, err := st.Horizon(ctx, frozen)
		return err == nil
	})
	step() // the hung tenant not swept for 10 s, past the blind window's 8 s
	untilWholeSweep(t, "a whole sweep after the thaw", sweep)
	if srv, err := st.Server(ctx, frozen, still.ServerID); err != nil || srv.Status != registry.StatusHealthy {
		t.Fatalf("the hung worker's server after the thaw: %+v, %v; want healthy", srv, err)
	}
}

// A worker hangs while the sweep's time is too short to share between the
// workers (1 s, as mcpd gives it at --heartbeat-interval 1s). Once the
// heartbeat path has found the worker silent, or once a sweep ran out of
// its time and its background probe of the worker went unanswered, each
// sweep sweeps the other worker's tenant from the last list of tenants,
// its silent server degraded, then unhealthy, on time, and fails the hung
// worker's tenant without a call. Before, every sweep waited for the hung
// worker until it ran out of time, and nothing moved until the thaw.
func TestCitusHungWorkerShortSweeps(t *testing.T) {
	const stall = time.Second
	t.Run("silent by the heartbeat path", func(t *testing.T) {
		hungWorkerShortSweeps(t, stall, func(st *pgstore.Store, frozen uuid.UUID, _ func() (store.SweepResult, error)) {
			// The heartbeat path's calls to the hung worker: one that gets
			// no answer for the stall time makes the worker silent, one
			// that stays in flight keeps it so until the thaw.
			held, release := context.WithCancel(t.Context())
			var calls sync.WaitGroup
			t.Cleanup(func() { release(); calls.Wait() })
			for _, wait := range []time.Duration{stall + stall/2, testwait.Cap} {
				calls.Go(func() {
					hctx, cancel := context.WithTimeout(held, wait)
					defer cancel()
					_, _ = st.Horizon(hctx, frozen)
				})
			}
			testwait.Until(t, "the hung worker silent", testwait.Cap, func() bool {
				hctx, cancel := context.WithTimeout(t.Context(), stall/10)
				defer cancel()
				_, err := st.Horizon(hctx, frozen)
				return errors.Is(err, pgstore.ErrWorkerStalled)
			})
		})
	})
	t.Run("found by a sweep that ran out of time", func(t *testing.T) {
		hungWorkerShortSweeps(t, stall, func(_ *pgstore.Store, _ uuid.UUID, sweep func() (store.SweepResult, error)) {
			if _, err := sweep(); !errors.Is(err, registry.ErrUnavailable) {
				t.Fatalf("the first sweep with a worker hung: %v; want it out of time", err)
			}
			testwait.Until(t, "a sweep that skips the hung worker", testwait.Cap, func() bool {
				_, err := sweep()
				var partial *registry.PartialError
				return errors.As(err, &partial)
			})
		})
	})
}

// A worker that holds no tenant with live servers hangs, with 1 s sweeps:
// no probe of it is made (it has no tenant to read), so a sweep waits at
// most half its time for its read of every shard, then sweeps the last
// list of tenants, and while that read goes on no sweep waits for another.
// Before, every sweep waited for that read until it ran out of time.
func TestCitusHungWorkerWithoutTenants(t *testing.T) {
	h := newShortSweeps(t, pgstore.Options{})
	h.c.Workers[1].Freeze(t)
	h.sweepSilentServer(t, func(err error) bool { return err == nil })
	h.c.Workers[1].Thaw(t)
}

// shortSweeps is a store on a private Citus cluster with a fake clock,
// swept as mcpd sweeps at --heartbeat-interval 1s (1 s per sweep), and a
// tenant on worker 0 with a server that heartbeats (alive) and one that
// never does (silent).
type shortSweeps struct {
	c       *pgtest.Citus
	db      *pgtest.DB
	clock   *clockwork.FakeClock
	st      *pgstore.Store
	running uuid.UUID
	alive   registry.Server
}

// shortInterval is the heartbeat interval of shortSweeps.
const shortInterval = time.Second

func newShortSweeps(t *testing.T, opts pgstore.Options) *shortSweeps {
	t.Helper()
	h := &shortSweeps{c: pgtest.NewCitus(t), clock: clockwork.NewFakeClockAt(epoch)}
	h.db = h.c.NewDB(t)
	opts.Clock = h.clock
	h.st = pgstore.New(h.db.App, opts)
	t.Cleanup(h.st.Close)
	h.running = h.c.TenantOnEachWorker(t, h.db)[0]
	h.alive = register(t, h.st, h.running, "alive")
	register(t, h.st, h.running, "silent")
	// A first sweep on a loaded machine may not fit in its second: one
	// that does must follow, and none may move anything.
	untilWholeSweep(t, "a whole first sweep", func() (store.SweepResult, error) { return h.sweep(t) })
	return h
}

// sweep sweeps with a second to do it.
func (h *shortSweeps) sweep(t *testing.T) (store.SweepResult, error) {
	sctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	return h.st.Sweep(sctx, store.SweepRequest{Now: h.clock.Now(), Interval: shortInterval, Limit: 100,
		BlindAfter: 2 * shortInterval})
}

// sweepSilentServer sweeps every half interval for 4 s of the clock, the
// alive server heartbeating: at each step a sweep's error must be as want
// says, and the silent server must go degraded at 2I, then unhealthy at
// 3I. A sweep that runs out of its second (a loaded machine) is made
// again at the same time of the clock; one that waited for the hung
// worker every time would never end as want says.
func (h *shortSweeps) sweepSilentServer(t *testing.T, want func(error) bool) {
	t.Helper()
	for step := range 8 {
		h.clock.Advance(shortInterval / 2)
		if _, _, err := h.st.Heartbeat(t.Context(), h.running, h.alive.ServerID); err != nil {
			t.Fatal(err)
		}
		sweepUntil(t, fmt.Sprintf("a 1 s sweep with a worker hung as wanted (step %d)", step),
			func() (store.SweepResult, error) { return h.sweep(t) }, want)
	}
	if moved := trailMoves(t, h.st, h.running); moved != silentMoves {
		t.Fatalf("the running worker's sweeps: %s, want %s", moved, silentMoves)
	}
}

// sweepUntil sweeps until a sweep's error is as want says, within
// testwait.Cap: a sweep that a loaded machine kept past its time (an
// ErrUnavailable) is made again at the same time of the clock; any other
// error fails the test. A sweep that waited for a hung worker every time
// would never end as wanted.
func sweepUntil(t *testing.T, what string, sweep func() (store.SweepResult, error), want func(error) bool) {
	t.Helper()
	testwait.Until(t, what, testwait.Cap, func() bool {
		_, err := sweep()
		if !want(err) && !errors.Is(err, registry.ErrUnavailable) {
			t.Fatalf("%s: %v", what, err)
		}
		return want(err)
	})
}

// untilWholeSweep sweeps until a sweep succeeds whole, within
// testwait.Cap, and fails the test on any transition of any of them,
// whole or not: a worker just thawed, or a loaded machine, may fail the
// first.
func untilWholeSweep(t *testing.T, what string, sweep func() (store.SweepResult, error)) {
	t.Helper()
	testwait.Until(t, what, testwait.Cap, func() bool {
		res, err := sweep()
		if len(res.Events) != 0 {
			t.Fatalf("%s: %+v, %v; want nothing moved", what, res.Events, err)
		}
		return err == nil
	})
}

// silentMoves is trailMoves of a tenant whose server "silent" went
// degraded, then unhealthy.
const silentMoves = "silent mcp.server.degraded, silent mcp.server.unhealthy"

// trailMoves lists the tenant's audit events other than registrations, as
// "module kind", from the trail: a sweep cut short by its time may have
// committed a move that it did not return.
func trailMoves(t *testing.T, st *pgstore.Store, tenant uuid.UUID) string {
	t.Helper()
	page, err := st.Events(t.Context(), tenant, registry.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var moved []string
	for _, ev := range page.Events {
		if ev.Kind != registry.KindRegistered {
			moved = append(moved, ev.ModuleName+" "+string(ev.Kind))
		}
	}
	return strings.Join(moved, ", ")
}

// hungWorkerShortSweeps runs TestCitusHungWorkerShortSweeps on a private
// cluster; found returns once the store may know that the frozen tenant's
// worker hangs.
func hungWorkerShortSweeps(t *testing.T, stall time.Duration,
	found func(st *pgstore.Store, frozen uuid.UUID, sweep func() (store.SweepResult, error))) {
	h := newShortSweeps(t, pgstore.Options{WorkerStall: stall})
	ctx := t.Context()
	frozen := h.c.TenantOnEachWorker(t, h.db)[1]
	still := register(t, h.st, frozen, "still")
	sweep := func() (store.SweepResult, error) { return h.sweep(t) }
	if _, err := sweep(); err != nil {
		t.Fatal(err)
	}

	h.c.Workers[1].Freeze(t)
	found(h.st, frozen, sweep)
	// The hung worker's tenant failed alone.
	h.sweepSilentServer(t, func(err error) bool {
		var partial *registry.PartialError
		return errors.As(err, &partial) && partial.Failed == 1 && errors.Is(err, pgstore.ErrWorkerStalled)
	})

	h.c.Workers[1].Thaw(t)
	testwait.Until(t, "the hung worker answering after the thaw", testwait.Cap, func() bool {
		_, err := h.st.Horizon(ctx, frozen)
		return err == nil
	})
	h.clock.Advance(shortInterval / 2)
	if _, _, err := h.st.Heartbeat(ctx, h.running, h.alive.ServerID); err != nil {
		t.Fatal(err)
	}
	// The hung tenant not swept for 4 s, past its blind window's 2 s.
	untilWholeSweep(t, "a whole sweep after the thaw", sweep)
	if srv, err := h.st.Server(ctx, frozen, still.ServerID); err != nil || srv.Status != registry.StatusHealthy {
		t.Fatalf("the hung worker's server after the thaw: %+v, %v; want healthy", srv, err)
	}
}

// A worker of the Citus cluster hangs (SIGSTOP: connections accepted,
// nothing answered) while the tenants of both workers heartbeat side by
// side, so that batches mix them: the running worker's tenant has every
// heartbeat answered well within the batch's time, its position and feed
// read, and its held heartbeats written, while the hung worker's tenant's
// calls fail with ErrWorkerStalled, none by its deadline: a call that ran
// the stall time has the worker probed, and once the probe goes
// unanswered the calls in flight end and the next fail at once.
// After the thaw the hung tenant's heartbeats are answered again.
func TestCitusHungWorkerHeartbeats(t *testing.T) {
	c := pgtest.NewCitus(t)
	db := c.NewDB(t)
	ctx := t.Context()
	const (
		stall        = time.Second
		batchTimeout = 4 * time.Second
		// Less than the batch's time: an answer that waited for the hung
		// worker's call does not come within it.
		patience = batchTimeout / 2
	)
	st := pgstore.New(db.App, pgstore.Options{WorkerStall: stall, BatchTimeout: batchTimeout})
	t.Cleanup(st.Close)
	tenants := c.TenantOnEachWorker(t, db)
	running, frozen := tenants[0], tenants[1]
	var runs, hangs []registry.Server
	for i := range 4 {
		runs = append(runs, register(t, st, running, fmt.Sprintf("run-%d", i)))
		hangs = append(hangs, register(t, st, frozen, fmt.Sprintf("hang-%d", i)))
	}
	beat := func(tenant uuid.UUID, srv registry.Server, wait time.Duration) (time.Duration, error) {
		bctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		start := time.Now()
		_, _, err := st.Heartbeat(bctx, tenant, srv.ServerID)
		return time.Since(start), err
	}

	c.Workers[1].Freeze(t)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		runErrs  []error
		runOK    int
		hangErrs = map[string]int{}
		stalled  int
		// waited counts the hung tenant's heartbeats that failed
		// otherwise than as the worker's (ErrWorkerStalled): by their
		// deadline, the coordinator's answer to their cancel.
		waited int
	)
	// Each server's heartbeats one after another (a bounded count each),
	// past the batch's time and the driver's second of waiting for the
	// cancel of a hung call: the worker is silent by then.
	until := time.Now().Add(batchTimeout + 3*stall)
	for i := range runs {
		wg.Go(func() {
			for n := 0; n < 200 && time.Now().Before(until); n++ {
				_, err := beat(running, runs[i], patience)
				mu.Lock()
				if err != nil {
					runErrs = append(runErrs, err)
				} else {
					runOK++
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
		// The hung worker's servers heartbeat without waiting for the
		// answers (many clients): batches keep mixing both workers.
		wg.Go(func() {
			for n := 0; n < 200 && time.Now().Before(until); n++ {
				wg.Go(func() {
					took, err := beat(frozen, hangs[i], batchTimeout+2*time.Second)
					mu.Lock()
					switch {
					case err == nil:
						hangErrs["answered"]++
					case !errors.Is(err, registry.ErrUnavailable):
						hangErrs[err.Error()]++
					case !errors.Is(err, pgstore.ErrWorkerStalled):
						waited++
					case took < stall:
						stalled++
					}
					mu.Unlock()
				})
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	// The feed: the running tenant's position and trail, alone and beside
	// the hung tenant's.
	rctx, cancel := context.WithTimeout(ctx, patience)
	if _, err := st.Horizon(rctx, running); err != nil {
		t.Errorf("the running tenant's position with the other worker hung: %v", err)
	}
	read, err := st.ReadFeed(rctx, []uuid.UUID{running, frozen}, make([]registry.Position, 2), 10)
	if !errors.Is(err, registry.ErrUnavailable) || len(read) != 1 || read[0].Tenant != running || len(read[0].Events) == 0 {
		t.Errorf("a feed read of both tenants with one worker hung: %d batches, %v; want the running tenant's events and unavailable",
			len(read), err)
	}
	cancel()
	wg.Wait()
	if len(runErrs) > 0 || runOK == 0 {
		t.Fatalf("the running worker's heartbeats with the other worker hung: %d ok, errors %v", runOK, runErrs)
	}
	if len(hangErrs) > 0 || stalled == 0 || waited > 0 {
		t.Fatalf("the hung worker's heartbeats: %v other answers, %d failed at once, %d waited for their deadline; "+
			"want ErrWorkerStalled only (a call in flight ends once the worker's probe goes unanswered), some at once",
			hangErrs, stalled, waited)
	}

	// A flush of held heartbeats of both tenants: the running tenant's
	// share is written, the hung one's fails.
	hctx, cancel := context.WithTimeout(ctx, batchTimeout)
	res := st.WriteHeldBatch(hctx, []store.TenantHeld{
		{Tenant: running, Beats: []store.HeldHeartbeat{{ServerID: runs[0].ServerID}}},
		{Tenant: frozen, Beats: []store.HeldHeartbeat{{ServerID: hangs[0].ServerID}}},
	})
	cancel()
	written := res[0].Err == nil
	for _, o := range res[0].Outcomes {
		written = written && o.Err == nil
	}
	if !written || !errors.Is(res[1].Err, registry.ErrUnavailable) {
		t.Fatalf("a held flush with one worker hung: %+v; want the running tenant's written, the hung one's unavailable", res)
	}

	c.Workers[1].Thaw(t)
	testwait.Until(t, "the hung worker's tenant answered after the thaw", testwait.Cap, func() bool {
		_, err := beat(frozen, hangs[0], patience)
		return err == nil
	})
	t.Logf("running tenant: %d heartbeats ok; hung tenant: %d failed at once", runOK, stalled)
}

// privateCitusStore starts a Citus cluster of the test's own (whose
// workers it may stop or freeze) and returns it, a new database of it and
// a store on that database on a fake clock at epoch.
func privateCitusStore(t *testing.T) (*pgtest.Citus, *pgtest.DB, *clockwork.FakeClock, *pgstore.Store) {
	t.Helper()
	c := pgtest.NewCitus(t)
	db := c.NewDB(t)
	clock := clockwork.NewFakeClockAt(epoch)
	st := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(st.Close)
	return c, db, clock, st
}

// While a worker is down, a sweep cannot read every shard: it reads which
// of the other workers' tenants have a server due (mcp_sweep_due_of) and
// sweeps those, rather than every tenant one by one, which with thousands
// of tenants took more than a sweep's time and left the running worker's
// silent servers unmoved for as long as the other was down (a black-box
// run, 2026-12-06). Here: the running worker's quiet tenants are marked,
// never swept one by one; its silent server moves on time.
func TestCitusSweepWithAWorkerDownReadsTheOthersDue(t *testing.T) {
	c := pgtest.NewCitus(t)
	db := c.NewDB(t)
	clock := clockwork.NewFakeClockAt(epoch)
	st, calls := tracedStore(t, db, pgstore.Options{Clock: clock})
	ctx := t.Context()

	stopped := c.TenantsOnWorker(t, db, 0, 1)[0]
	running := c.TenantsOnWorker(t, db, 1, 9)
	due := running[0]
	register(t, st, stopped, "alpha")
	silent := register(t, st, due, "silent")
	var quiet []registry.Server
	for _, tenant := range running[1:] {
		quiet = append(quiet, register(t, st, tenant, "quiet"))
	}
	const interval = 10 * time.Second
	sweep := func() (store.SweepResult, error) {
		return st.Sweep(ctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100, BlindAfter: 2 * interval})
	}
	if _, err := sweep(); err != nil {
		t.Fatal(err)
	}

	c.Workers[0].Stop(t)
	calls.reset()
	var events []registry.Event
	for range 7 { // 35 s
		clock.Advance(5 * time.Second)
		for _, srv := range quiet {
			if _, _, err := st.Heartbeat(ctx, srv.TenantID, srv.ServerID); err != nil {
				t.Fatalf("heartbeat on the running worker: %v", err)
			}
		}
		res, err := sweep()
		var partial *registry.PartialError
		if !errors.As(err, &partial) || partial.Failed != 1 {
			t.Fatalf("sweep with a worker down: %v; want the stopped worker's tenant failed alone", err)
		}
		events = append(events, res.Events...)
	}
	if len(events) != 2 || events[0].ServerID != silent.ServerID || events[0].Kind != registry.KindDegraded ||
		events[1].Kind != registry.KindUnhealthy {
		t.Fatalf("the running worker's sweeps: %+v, want silent degraded then unhealthy", events)
	}
	if calls.count("mcp_sweep_due_of(") == 0 {
		t.Error("no sweep read the running worker's tenants due")
	}
	for _, tenant := range calls.tenants("mcp_sweep_tenant(") {
		if tenant != due {
			t.Errorf("tenant %s swept one by one while its worker ran and it had nothing due", tenant)
		}
	}
	for _, srv := range quiet {
		var status string
		if err := db.Admin.QueryRow(ctx, `SELECT status FROM mcp_servers WHERE tenant_id = $1 AND server_id = $2`,
			srv.TenantID, srv.ServerID).Scan(&status); err != nil || status != "healthy" {
			t.Errorf("quiet server %s: %s, %v; want healthy", srv.ServerID, status, err)
		}
	}
}

// Tenants registered after the last sweep, whose worker stops before any
// sweep reaches them, have no sweep of their own to measure a blind
// window from. Their servers, whose heartbeats are refused while the
// worker is down, still get their full intervals when the worker
// returns: the replica that sweeps marks each such tenant swept at its
// first failed sweep (unswept.go), so the tenant's own window opens; one
// registered through another replica, which the sweeping replica did not
// know while the list of tenants could not be read, counts as failed
// since that list was first unread. A server of them that stays silent
// is marked after the window, as any other.
func TestCitusStoppedWorkerTenantNeverSwept(t *testing.T) {
	c, db, clock, st := privateCitusStore(t)
	ctx := t.Context()
	other := c.TenantOnEachWorker(t, db)[1]
	stopped := c.TenantsOnWorker(t, db, 0, 2)
	b := register(t, st, other, "bravo")
	const interval = 10 * time.Second
	sweep := func() (store.SweepResult, error) {
		return st.Sweep(ctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100, BlindAfter: 2 * interval})
	}
	if _, err := sweep(); err != nil {
		t.Fatal(err)
	}
	// Registered after that sweep, one tenant through this replica, the
	// other through a second one: neither was ever swept.
	replica := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(replica.Close)
	type server struct {
		tenant, id uuid.UUID
	}
	var beating, silent []server
	for i, reg := range []*pgstore.Store{st, replica} {
		a := register(t, reg, stopped[i], "alpha")
		q := register(t, reg, stopped[i], "silent")
		beating = append(beating, server{stopped[i], a.ServerID})
		silent = append(silent, server{stopped[i], q.ServerID})
	}

	c.Workers[0].Stop(t)
	for range 6 { // 30 s
		clock.Advance(5 * time.Second)
		if _, _, err := st.Heartbeat(ctx, other, b.ServerID); err != nil {
			t.Fatalf("heartbeat on the running worker: %v", err)
		}
		for _, srv := range beating {
			if _, _, err := st.Heartbeat(ctx, srv.tenant, srv.id); !errors.Is(err, registry.ErrUnavailable) {
				t.Fatalf("heartbeat on the stopped worker: %v, want ErrUnavailable", err)
			}
		}
		if res, err := sweep(); !errors.Is(err, registry.ErrUnavailable) || len(res.Events) != 0 {
			t.Fatalf("sweep with a worker down: %+v, %v; want no transition and ErrUnavailable", res.Events, err)
		}
	}
	c.Workers[0].Start(t)
	clock.Advance(time.Second)
	var res store.SweepResult
	testwait.Poll(t, "a sweep after the worker returned", testwait.Cap, func() (err error) {
		res, err = sweep()
		return err
	})
	if len(res.Events) != 0 {
		t.Fatalf("first sweep after the worker returned: %+v, want no transition (the tenants' own blind windows)", res.Events)
	}
	// alpha heartbeats again; silent does not, and is marked 2I and 3I
	// after the window's end.
	isSilent := map[uuid.UUID]bool{silent[0].id: true, silent[1].id: true}
	marks := map[uuid.UUID][]string{}
	for at := 5 * time.Second; at <= 35*time.Second; at += 5 * time.Second {
		clock.Advance(5 * time.Second)
		for _, srv := range append([]server{{other, b.ServerID}}, beating...) {
			if _, _, err := st.Heartbeat(ctx, srv.tenant, srv.id); err != nil {
				t.Fatalf("heartbeat after the worker returned: %v", err)
			}
		}
		res, err := sweep()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range res.Events {
			if !isSilent[ev.ServerID] {
				t.Fatalf("%s of %s marked %s at +%s, want only the silent servers marked", ev.ModuleName, ev.TenantID, ev.Kind, at)
			}
			marks[ev.TenantID] = append(marks[ev.TenantID], string(ev.Kind)+"@"+at.String())
		}
	}
	want := []string{"mcp.server.degraded@20s", "mcp.server.unhealthy@30s"}
	for i, tenant := range stopped {
		if !slices.Equal(marks[tenant], want) {
			t.Errorf("silent server of the tenant registered through replica %d: marks %v, want %v (2I and 3I after the window's end)",
				i+1, marks[tenant], want)
		}
	}
}
