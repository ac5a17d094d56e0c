package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// On Citus a sweep reads which tenants have a server due, in one read of
// every shard, and sweeps those alone (a transaction each); the others are
// marked swept in one call per worker, which opens the blind window of a
// tenant not swept for longer than BlindAfter, as its own sweep would.
func TestCitusSweepReadsDueTenants(t *testing.T) {
	c, db, clock, st, calls := citusSweepStore(t)
	ctx := t.Context()

	tenants := c.TenantOnEachWorker(t, db)
	due, quiet := tenants[0], tenants[1]
	silent := register(t, st, due, "silent")
	register(t, st, due, "busy")
	register(t, st, quiet, "alive")
	const interval = 10 * time.Second
	sweep := func() store.SweepResult {
		t.Helper()
		res, err := st.Sweep(ctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100, BlindAfter: 2 * interval})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	sweptAt := func(tenant uuid.UUID) (last, blind *time.Time) {
		t.Helper()
		if err := db.Admin.QueryRow(ctx, `SELECT last_sweep_at, blind_until FROM mcp_tenant_servers WHERE tenant_id = $1`,
			tenant).Scan(&last, &blind); err != nil {
			t.Fatal(err)
		}
		return last, blind
	}

	// Nothing due: no tenant's own sweep; both marked swept.
	clock.Advance(time.Second)
	if res := sweep(); len(res.Events) != 0 {
		t.Fatalf("a sweep with nothing due: %+v", res.Events)
	}
	if n := calls.count("mcp_sweep_tenant("); n != 0 {
		t.Errorf("a sweep with nothing due made %d calls of mcp_sweep_tenant, want none", n)
	}
	if n := calls.count("mcp_sweep_mark_group("); n != 2 {
		t.Errorf("a sweep with nothing due of two tenants on two workers made %d calls of mcp_sweep_mark_group, want 2", n)
	}
	// Its read of every shard had every worker answer: no probe of each.
	if n := calls.count("mcp_feed_horizon("); n != 0 {
		t.Errorf("a sweep whose tenants were read from every shard probed the workers (%d reads)", n)
	}
	for _, tenant := range tenants {
		if last, _ := sweptAt(tenant); last == nil || !last.Equal(clock.Now()) {
			t.Errorf("tenant %v's last sweep %v, want %v", tenant, last, clock.Now())
		}
	}

	// Sweeps every 5 s while the other servers heartbeat: nothing due
	// until silent's 2I. Then its tenant alone is swept, and the quiet
	// tenant, whose last sweep is set back past BlindAfter (as when its
	// worker was down), opens its blind window.
	heartbeat := func(tenant uuid.UUID, module string) {
		t.Helper()
		srvs, err := st.Servers(ctx, tenant, registry.ServerFilter{ModuleName: module, Limit: 1})
		if err != nil || len(srvs.Servers) != 1 {
			t.Fatalf("find %s: %v", module, err)
		}
		if _, _, err := st.Heartbeat(ctx, tenant, srvs.Servers[0].ServerID); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // to 16 s after the registrations
		clock.Advance(5 * time.Second)
		heartbeat(due, "busy")
		heartbeat(quiet, "alive")
		if res := sweep(); len(res.Events) != 0 {
			t.Fatalf("a sweep with nothing due: %+v", res.Events)
		}
	}
	if n := calls.count("mcp_sweep_tenant("); n != 0 {
		t.Errorf("sweeps with nothing due made %d calls of mcp_sweep_tenant, want none", n)
	}
	clock.Advance(5 * time.Second) // 21 s: silent is past 2I
	heartbeat(due, "busy")
	heartbeat(quiet, "alive")
	if _, err := db.Admin.Exec(ctx, `UPDATE mcp_tenant_servers SET last_sweep_at = $2 WHERE tenant_id = $1`,
		quiet, clock.Now().Add(-30*time.Second)); err != nil {
		t.Fatal(err)
	}
	calls.reset()
	res := sweep()
	if len(res.Events) != 1 || res.Events[0].ServerID != silent.ServerID || res.Events[0].Kind != registry.KindDegraded {
		t.Fatalf("sweep with one server due: %+v, want silent degraded", res.Events)
	}
	if own := calls.tenants("mcp_sweep_tenant("); len(own) != 1 || own[0] != due {
		t.Errorf("tenants swept one by one: %v, want %v alone", own, due)
	}
	if last, blind := sweptAt(quiet); last == nil || !last.Equal(clock.Now()) || blind == nil || !blind.Equal(clock.Now()) {
		t.Errorf("quiet tenant after a gap of 25 s: last sweep %v, blind until %v; want both %v", last, blind, clock.Now())
	}

	// The next sweep keeps the window it opened, and moves the last sweep.
	opened := clock.Now()
	clock.Advance(5 * time.Second)
	heartbeat(due, "busy")
	heartbeat(quiet, "alive")
	sweep()
	if last, blind := sweptAt(quiet); last == nil || !last.Equal(clock.Now()) || blind == nil || !blind.Equal(opened) {
		t.Errorf("quiet tenant a sweep later: last sweep %v, blind until %v; want %v and %v", last, blind, clock.Now(), opened)
	}
}

// A tenant with more servers due than one call of its sweep moves is
// swept in several calls, each committing its own transitions, so that a
// sweep cut short by its time keeps what its calls wrote and the next one
// goes on from there, instead of one call of the whole batch that a
// timeout rolls back every time (sweepsize.go). All of them move in one
// sweep, in order, each at its own position.
func TestCitusSweepOfALargeTenantInCalls(t *testing.T) {
	c, db, clock, st, calls := citusSweepStore(t)
	ctx := t.Context()
	tenant := c.TenantOnEachWorker(t, db)[0]
	const servers = 150
	for i := range servers {
		register(t, st, tenant, fmt.Sprintf("m%03d", i))
	}
	const interval = 10 * time.Second
	clock.Advance(4 * interval)
	res, err := st.Sweep(ctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != servers {
		t.Fatalf("a sweep of %d servers due: %d events", servers, len(res.Events))
	}
	if n := calls.count("mcp_sweep_tenant("); n < 2 {
		t.Errorf("%d servers due swept in %d call(s) of mcp_sweep_tenant, want several", servers, n)
	}
	seen := map[uuid.UUID]bool{}
	for i, ev := range res.Events {
		if ev.ToStatus != registry.StatusUnhealthy || seen[ev.ServerID] {
			t.Fatalf("event %d: %+v (seen before: %v)", i, ev, seen[ev.ServerID])
		}
		seen[ev.ServerID] = true
	}
	var unhealthy, events, first, last int64
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM mcp_servers WHERE tenant_id = $1 AND status = 'unhealthy'`,
		tenant).Scan(&unhealthy); err != nil {
		t.Fatal(err)
	}
	if unhealthy != servers {
		t.Fatalf("%d of %d servers unhealthy after the sweep", unhealthy, servers)
	}
	// The registrations and the transitions: every position once, no gap.
	if err := db.Admin.QueryRow(ctx, `SELECT count(DISTINCT position), min(position), max(position) FROM mcp_audit_events
		WHERE tenant_id = $1`, tenant).Scan(&events, &first, &last); err != nil {
		t.Fatal(err)
	}
	if events != 2*servers || first != 1 || last != 2*servers {
		t.Fatalf("the tenant's trail: %d positions from %d to %d, want 1 to %d", events, first, last, 2*servers)
	}
}

// A tenant with a server due whose own call a sweep does not reach (here
// the sweep's limit runs out first; under load its time) is marked swept
// all the same, so that the next sweep does not take it for blind: with
// many tenants due at a short interval, each swept less often than
// BlindAfter opened a blind window at every sweep of its own and none
// ever moved (a black-box run of 300 tenants at 1 s, 2026-12-06).
func TestCitusSweepMarksTenantsItDoesNotReach(t *testing.T) {
	c, db, clock, st, _ := citusSweepStore(t)
	ctx := t.Context()
	tenants := c.TenantOnEachWorker(t, db)
	for _, tenant := range tenants {
		register(t, st, tenant, "silent")
	}
	const interval = 10 * time.Second
	sweep := func(limit int) store.SweepResult {
		t.Helper()
		res, err := st.Sweep(ctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: limit, BlindAfter: 2 * interval})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	clock.Advance(15 * time.Second)
	if res := sweep(100); len(res.Events) != 0 {
		t.Fatalf("a sweep with nothing due: %+v", res.Events)
	}
	// Both servers degraded are due; a limit of one reaches one tenant.
	clock.Advance(10 * time.Second)
	first := sweep(1)
	if len(first.Events) != 1 {
		t.Fatalf("a sweep of limit 1 with two tenants due: %d events", len(first.Events))
	}
	for _, tenant := range tenants {
		var last time.Time
		if err := db.Admin.QueryRow(ctx, `SELECT last_sweep_at FROM mcp_tenant_servers WHERE tenant_id = $1`,
			tenant).Scan(&last); err != nil {
			t.Fatal(err)
		}
		if !last.Equal(clock.Now()) {
			t.Errorf("tenant %s: last swept at %s, want the sweep's time %s", tenant, last.UTC(), clock.Now().UTC())
		}
	}
	// Within BlindAfter of that sweep the other tenant's server moves.
	clock.Advance(15 * time.Second)
	moved := map[uuid.UUID]bool{first.Events[0].TenantID: true}
	for _, ev := range sweep(100).Events {
		moved[ev.TenantID] = true
	}
	for _, tenant := range tenants {
		if !moved[tenant] {
			t.Errorf("tenant %s: its silent server never moved", tenant)
		}
	}
}

// A sweep that takes its whole time on Citus (a backlog of thousands of
// tenants due, each call through Citus's planner) ends about when the next
// begins, more than BlindAfter after it began. It marks the guard and its
// tenants again when it ends, so that the next sweep measures its gap from
// there and opens no blind window, which would hold every server back for
// 2I (a black-box run, 2026-12-06: 3,000 tenants due at once at a 1 s
// interval, none unhealthy 70 s after their last heartbeat). A real gap
// after such a sweep still opens a window, from the sweep's end. Here a
// sweep's time is its request's, and the store's clock, set later, says
// when it ended.
func TestCitusSweepThatRanLongOpensNoBlindWindow(t *testing.T) {
	c, db, clock, st, _ := citusSweepStore(t)
	ctx := t.Context()
	tenants := c.TenantOnEachWorker(t, db)
	for _, tenant := range tenants {
		register(t, st, tenant, "silent") // last heartbeat at epoch
	}
	const interval, blindAfter = time.Second, time.Second
	sweep := func(at time.Duration) store.SweepResult {
		t.Helper()
		res, err := st.Sweep(ctx, store.SweepRequest{Now: epoch.Add(at), Interval: interval, Limit: 100, BlindAfter: blindAfter})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// At 1 s, ending at 2.5 s: nothing due (2I is 2 s).
	clock.Advance(2500 * time.Millisecond)
	if res := sweep(time.Second); len(res.Events) != 0 || res.Opened != nil {
		t.Fatalf("the first sweep: %d events, blind window %+v", len(res.Events), res.Opened)
	}
	// At 2.6 s, 1.6 s after the first began and 0.1 s after it ended:
	// both servers degraded, and no blind window. This one ends at 3.4 s.
	clock.Advance(900 * time.Millisecond)
	res := sweep(2600 * time.Millisecond)
	if res.Opened != nil {
		t.Fatalf("a blind window %s to %s, 100 ms after a sweep ended", res.Opened.From, res.Opened.Until)
	}
	degraded := map[uuid.UUID]bool{}
	for _, ev := range res.Events {
		if ev.ToStatus == registry.StatusDegraded {
			degraded[ev.TenantID] = true
		}
	}
	for _, tenant := range tenants {
		if !degraded[tenant] {
			t.Errorf("tenant %s: its silent server not degraded 2.6 s after its last heartbeat (events %+v)", tenant, res.Events)
		}
	}
	// At 4.6 s, 1.2 s after that sweep ended: a blind window from its end,
	// and no server made unhealthy.
	clock.Advance(1200 * time.Millisecond)
	res = sweep(4600 * time.Millisecond)
	if res.Opened == nil || !res.Opened.From.Equal(epoch.Add(3400*time.Millisecond)) ||
		!res.Opened.Until.Equal(epoch.Add(4600*time.Millisecond)) {
		t.Fatalf("after a gap of 1.2 s from the end of a sweep: blind window %+v, want 3.4 s to 4.6 s after epoch", res.Opened)
	}
	if len(res.Events) != 0 {
		t.Fatalf("%d transitions at the end of a blind window: %+v", len(res.Events), res.Events)
	}
}

// citusSweepStore returns a database of the shared Citus cluster and a
// store on it, on a fake clock at epoch, whose statements are recorded.
func citusSweepStore(t *testing.T) (*pgtest.Citus, *pgtest.DB, *clockwork.FakeClock, *pgstore.Store, *queryLog) {
	t.Helper()
	c := pgtest.SharedCitus(t)
	db := c.NewDB(t)
	clock := clockwork.NewFakeClockAt(epoch)
	st, calls := tracedStore(t, db, pgstore.Options{Clock: clock})
	return c, db, clock, st, calls
}

// On Citus a worker's tenants due are swept in one call to that worker
// (mcp_sweep_group), not one call each: with 300 tenants due at 1 s the
// calls of each tenant did not fit in a sweep (a black-box run,
// 2026-12-06). A tenant whose rows another transaction holds is left by
// the call, which waits for no lock, and swept alone once they are let
// go. Meanwhile the sweep holds its guard: a second replica's sweep
// proceeds with nothing and calls no worker, as on plain PostgreSQL.
func TestCitusSweepGroupsAWorkersTenants(t *testing.T) {
	c, db, clock, st, calls := citusSweepStore(t)
	ctx := t.Context()
	const perWorker = 3
	var tenants []uuid.UUID
	for w := range c.Workers {
		tenants = append(tenants, c.TenantsOnWorker(t, db, w, perWorker)...)
	}
	for _, tenant := range tenants {
		register(t, st, tenant, "a")
		register(t, st, tenant, "b")
	}
	const interval = 10 * time.Second
	req := func() store.SweepRequest {
		return store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100, BlindAfter: 2 * interval}
	}
	if _, err := st.Sweep(ctx, req()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(interval / 2)
	if _, err := st.Sweep(ctx, req()); err != nil {
		t.Fatal(err)
	}

	// Every server past 2I; one tenant's feed row held by another
	// transaction.
	held := tenants[1]
	release := holdRows(t, db, `SELECT 1 FROM mcp_tenant_feed WHERE tenant_id = $1 FOR UPDATE`, held)
	clock.Advance(interval + interval/2)
	calls.reset()
	type result struct {
		res store.SweepResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := st.Sweep(ctx, req())
		done <- result{res, err}
	}()
	testwait.Until(t, "the held tenant swept alone", testwait.Cap, func() bool {
		return calls.count("mcp_sweep_tenant(") > 0
	})
	if n := calls.count("mcp_sweep_group("); n != len(c.Workers) {
		t.Errorf("%d tenants due on %d workers: %d calls of mcp_sweep_group, want one per worker", len(tenants),
			len(c.Workers), n)
	}
	if alone := calls.tenants("mcp_sweep_tenant("); len(alone) != 1 || alone[0] != held {
		t.Errorf("tenants swept alone: %v, want the held one, %v", alone, held)
	}

	// A second replica sweeping now proceeds with nothing.
	// Bounded: a replica that proceeded would wait for the held row too
	// (generously: a new store's first read of every shard on a loaded
	// machine).
	other, otherCalls := tracedStore(t, db, pgstore.Options{Clock: clock})
	octx, cancel := context.WithTimeout(ctx, testwait.Cap)
	defer cancel()
	res, err := other.Sweep(octx, req())
	if err != nil || len(res.Events) != 0 {
		t.Fatalf("a second replica's sweep during the first: %+v, %v; want nothing", res.Events, err)
	}
	for _, fn := range []string{"mcp_sweep_due(", "mcp_sweep_mark_group(", "mcp_sweep_group(", "mcp_sweep_tenant("} {
		if n := otherCalls.count(fn); n != 0 {
			t.Errorf("a second replica's sweep during the first made %d calls of %s", n, fn)
		}
	}

	if err := release(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	moved := map[uuid.UUID]int{}
	for _, ev := range r.res.Events {
		if ev.Kind != registry.KindDegraded {
			t.Errorf("event %+v, want degraded", ev)
		}
		moved[ev.TenantID]++
	}
	for _, tenant := range tenants {
		if moved[tenant] != 2 {
			t.Errorf("tenant %s: %d of its 2 servers degraded by the sweep", tenant, moved[tenant])
		}
	}
	// Each tenant's trail: its registrations, then its transitions, every
	// position once.
	for _, tenant := range tenants {
		var n, last int64
		if err := db.Admin.QueryRow(ctx, `SELECT count(DISTINCT position), max(position) FROM mcp_audit_events
			WHERE tenant_id = $1`, tenant).Scan(&n, &last); err != nil {
			t.Fatal(err)
		}
		if n != 4 || last != 4 {
			t.Errorf("tenant %s: %d positions up to %d, want 1 to 4", tenant, n, last)
		}
	}
}

// The sweep's reads of every shard (mcp_sweep_tenants, mcp_sweep_due) read
// a worker's shards one after another on the session's one cached
// connection to it: Citus's default opens more connections while tasks
// wait and closes them when the statement ends, which under load made new
// worker connections at every sweep. Citus is made to open them at once
// here (executor_slow_start_interval 0): a plain read of every shard opens
// several per worker each time, the sweep's reads none after the first.
func TestCitusSweepReadsKeepOneConnectionPerWorker(t *testing.T) {
	c, db, clock, st, _ := citusSweepStore(t)
	ctx := t.Context()
	for _, tenant := range c.TenantOnEachWorker(t, db) {
		register(t, st, tenant, "a")
	}
	// A connection to each worker's database, to read its statistics.
	var workers []*pgx.Conn
	for _, w := range c.Workers {
		conn, err := pgx.Connect(ctx, w.URL("", db.Name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		workers = append(workers, conn)
	}
	sessions := func() int64 {
		t.Helper()
		var total int64
		for _, conn := range workers {
			var n int64
			if err := conn.QueryRow(ctx, `SELECT sessions FROM pg_stat_database WHERE datname = current_database()`).
				Scan(&n); err != nil {
				t.Fatal(err)
			}
			total += n
		}
		return total
	}
	// opened returns how many sessions the workers opened in db while
	// reads ran on a session of the app role.
	opened := func(reads ...string) int64 {
		t.Helper()
		before := sessions()
		cfg, err := pgx.ParseConfig(db.AppURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["citus.executor_slow_start_interval"] = "0"
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The workers' sessions of this one carry its global pid in
		// their application_name.
		var gpid int64
		if err := conn.QueryRow(ctx, `SELECT citus_backend_gpid()`).Scan(&gpid); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			for _, q := range reads {
				if _, err := conn.Exec(ctx, q, clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
		}
		open := func() int64 {
			var total int64
			for _, w := range workers {
				var n int64
				if err := w.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`,
					fmt.Sprintf("citus_internal gpid=%d", gpid)).Scan(&n); err != nil {
					t.Fatal(err)
				}
				total += n
			}
			return total
		}
		if open() == 0 {
			t.Fatalf("no worker connection of the session (gpid %d) found open before it closed", gpid)
		}
		_ = conn.Close(ctx) // and with it the session's worker connections
		// A worker session's count reaches the statistics as it exits,
		// before it leaves pg_stat_activity.
		testwait.Until(t, "the session's worker connections closed", testwait.Cap, func() bool { return open() == 0 })
		for _, w := range workers {
			if _, err := w.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
				t.Fatal(err)
			}
		}
		return sessions() - before
	}
	plain := opened(`SELECT count(*) FROM mcp_tenant_servers WHERE live > 0 AND $1::timestamptz IS NOT NULL`)
	sweep := opened(`SELECT count(*) FROM mcp_sweep_tenants() WHERE $1::timestamptz IS NOT NULL`,
		`SELECT count(*) FROM mcp_sweep_due($1, interval '20 s', interval '30 s')`)
	t.Logf("worker sessions opened: %d by 10 plain reads of every shard, %d by 10 sweeps' two reads", plain, sweep)
	if plain < 4*int64(len(c.Workers)) {
		t.Fatalf("10 plain reads of every shard opened %d worker sessions: the measure sees too little", plain)
	}
	if sweep > 2*int64(len(c.Workers)) {
		t.Errorf("10 sweeps' reads of every shard opened %d worker sessions, want about one per worker", sweep)
	}
}

// A replica that dies while it sweeps lets another sweep at once, and
// without a blind window: the sweep's start was recorded when it began
// (the guard commits at once; only the sweep's lock is held to its end).
// With the guard held to the end, the dead replica's start was rolled
// back, and the survivor, finding the last sweep older than BlindAfter,
// opened a window and moved nothing (a black-box run at 1 s: 3.5-4 s
// without a transition after the sweeping replica was SIGKILLed).
func TestCitusSweepTakeoverAfterAReplicaDies(t *testing.T) {
	c, db, clock, _, _ := citusSweepStore(t)
	ctx := t.Context()
	replica := func(name string) *pgstore.Store {
		cfg, err := pgxpool.ParseConfig(db.AppURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["application_name"] = name
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st := pgstore.New(pool, pgstore.Options{Clock: clock})
		t.Cleanup(st.Close)
		return st
	}
	dying, survivor := replica("dying"), replica("survivor")
	tenants := c.TenantsOnWorker(t, db, 0, 2)
	for _, tenant := range tenants {
		register(t, dying, tenant, "a")
	}
	const interval, blindAfter = 10 * time.Second, 10 * time.Second
	req := func() store.SweepRequest {
		return store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100, BlindAfter: blindAfter}
	}
	if _, err := dying.Sweep(ctx, req()); err != nil {
		t.Fatal(err)
	}

	// The dying replica's next sweep waits on a tenant's held row, and
	// its sessions are ended meanwhile.
	clock.Advance(6 * time.Second)
	release := holdRows(t, db, `SELECT 1 FROM mcp_tenant_servers WHERE tenant_id = $1 FOR UPDATE`, tenants[1])
	done := make(chan error, 1)
	go func() {
		_, err := dying.Sweep(ctx, req())
		done <- err
	}()
	testwait.Until(t, "the dying replica's sweep waiting on the held row", testwait.Cap, func() bool {
		var waiting bool
		if err := db.Admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE application_name = 'dying' AND state = 'active' AND query LIKE '%mcp_sweep_tenant(%')`).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	if _, err := db.Admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dying'`); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := release(); err != nil {
		t.Fatal(err)
	}

	// 12 s after the last whole sweep, 6 s after the dying one began.
	clock.Advance(6 * time.Second)
	res, err := survivor.Sweep(ctx, req())
	if err != nil {
		t.Fatal(err)
	}
	if res.Opened != nil {
		t.Fatalf("the survivor's sweep 6 s after the dying replica's began opened a blind window %+v", *res.Opened)
	}
}

// A tenant the sweep is told to skip (a replica holds heartbeats of its
// that it answered and could not write: store.SweepRequest.Skip) gets no
// call and no mark: its silent server stays healthy, the sweep fails for
// it alone, and the other tenant's silent server moves. Swept again after
// more than BlindAfter, the skipped tenant opens its blind window, so that
// its servers get their full intervals before any moves.
func TestCitusSweepSkipsTenantsItIsTold(t *testing.T) {
	c, db, clock, st, calls := citusSweepStore(t)
	ctx := t.Context()
	tenants := c.TenantOnEachWorker(t, db)
	skipped, swept := tenants[0], tenants[1]
	held := register(t, st, skipped, "held")
	silent := register(t, st, swept, "silent")
	const interval = 10 * time.Second
	sweep := func(skip ...uuid.UUID) (store.SweepResult, error) {
		return st.Sweep(ctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100,
			BlindAfter: 2 * interval, Skip: skip})
	}
	if _, err := sweep(); err != nil {
		t.Fatal(err)
	}
	calls.reset()
	var events []registry.Event
	for range 5 { // 25 s: past 2I for both servers
		clock.Advance(5 * time.Second)
		res, err := sweep(skipped)
		var partial *registry.PartialError
		if !errors.As(err, &partial) || partial.Failed != 1 {
			t.Fatalf("a sweep skipping one tenant of two: %v; want it failed for that tenant alone", err)
		}
		events = append(events, res.Events...)
	}
	if len(events) != 1 || events[0].ServerID != silent.ServerID || events[0].Kind != registry.KindDegraded {
		t.Fatalf("sweeps skipping one tenant: %+v; want the other tenant's silent server degraded", events)
	}
	for _, name := range []string{"mcp_sweep_tenant(", "mcp_sweep_group(", "mcp_sweep_mark_group("} {
		for _, tenant := range calls.tenants(name) {
			if tenant == skipped {
				t.Errorf("the skipped tenant got a call of %s", name)
			}
		}
	}
	if srv, err := st.Server(ctx, skipped, held.ServerID); err != nil || srv.Status != registry.StatusHealthy {
		t.Fatalf("the skipped tenant's server: %+v, %v; want healthy", srv, err)
	}
	// Swept again 25 s after its last sweep (BlindAfter 20 s): its blind
	// window opens, and its server, silent for 25 s, does not move yet.
	clock.Advance(time.Second)
	res, err := sweep()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range res.Events {
		if ev.TenantID == skipped {
			t.Fatalf("the skipped tenant's first sweep moved %+v; want its blind window to hold it", ev)
		}
	}
}
