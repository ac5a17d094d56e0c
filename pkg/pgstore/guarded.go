package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.Backend = (*Store)(nil)

// Sweep applies at most req.Limit of the transitions due at req.Now across
// every tenant: through mcp_sweep, or with req.BlindAfter set through
// mcp_sweep_guarded, behind the blind-window rule; one round trip. Of
// several replicas sweeping guarded at once, one sweeps and the others get
// an empty result.
func (s *Store) Sweep(ctx context.Context, req store.SweepRequest) (store.SweepResult, error) {
	at := s.now()
	if !req.Now.IsZero() {
		t := req.Now.UTC().Truncate(time.Microsecond)
		at = &t
	}
	citus, err := s.onCitus(ctx)
	if err != nil {
		return store.SweepResult{}, translate(err)
	}
	if citus {
		return s.sweepPerTenant(ctx, at, req)
	}
	if req.BlindAfter <= 0 {
		evs, err := s.sweepUnguarded(ctx, at, req)
		return store.SweepResult{Events: evs}, err
	}
	rows, err := s.pool.Query(ctx, `
SELECT event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at, body,
       blind_from, blind_until, blind_new
FROM mcp_sweep_guarded($1::timestamptz, $2::bigint * interval '1 microsecond', $3::bigint * interval '1 microsecond',
                       $4, $5::bigint * interval '1 microsecond')`,
		at, degradedLag(req).Microseconds(), unhealthyLag(req).Microseconds(),
		req.Limit, req.BlindAfter.Microseconds())
	if err != nil {
		return store.SweepResult{}, translate(err)
	}
	defer rows.Close()
	var res store.SweepResult
	for rows.Next() {
		var (
			r                     eventRow
			blindFrom, blindUntil *time.Time
			blindNew              bool
		)
		if err := rows.Scan(append(r.appendDestNoSeq(make([]any, 0, 13)), &blindFrom, &blindUntil, &blindNew)...); err != nil {
			return store.SweepResult{}, translate(err)
		}
		if blindNew && res.Opened == nil && blindFrom != nil && blindUntil != nil {
			res.Opened = &store.BlindWindow{From: blindFrom.UTC(), Until: blindUntil.UTC()}
		}
		ev, ok, err := r.event()
		if err != nil {
			return store.SweepResult{}, err
		}
		if ok {
			res.Events = append(res.Events, ev)
		}
	}
	if err := rows.Err(); err != nil {
		return store.SweepResult{}, translate(err)
	}
	return res, nil
}

// sweepPerTenant is Sweep on Citus (migration 0019): a lock held until the
// sweep ends, the blind-window rule (mcp_sweep_guard), then the
// tenants that have live servers and a server due (the others marked
// swept, sweepDue), in one transaction per worker for its tenants
// (sweepGroups), and those the workers' calls left in one transaction per
// tenant (mcp_sweep_tenant), each routed to the tenant's shard,
// tenantParallelism at a time. A tenant whose sweep fails
// (its worker is down) keeps its servers as they are, as in a database
// outage, and the other tenants' sweeps go on; the sweep's error is the
// first of them, with the events of the tenants swept, as a
// registry.PartialError when some tenants were swept. Each read of every
// shard and each worker's or tenant's call has at most its workerShare of
// the time left: a worker that hangs fails its first call, its other
// tenants are not called again in this sweep, and the rest of the time
// goes to the other workers' tenants. A tenant back from a failure
// longer than BlindAfter is first marked swept at its first failure
// (markUnswept), so that it opens its own blind window even if it was
// never swept before.
func (s *Store) sweepPerTenant(ctx context.Context, at *time.Time, req store.SweepRequest) (store.SweepResult, error) {
	started := time.Now()
	// When a tenant this sweep fails counts as failed since (unswept.go):
	// the sweep's start, as a tenant swept before measures its window
	// from the start of its last sweep.
	failedAt := sweepNow(at)
	var res store.SweepResult
	deg := degradedLag(req).Microseconds()
	unh := unhealthyLag(req).Microseconds()
	// Lags in microseconds: the guard's "never" (1000 years) is past
	// time.Duration's range.
	degLag, unhLag := deg, unh
	if req.BlindAfter > 0 {
		var (
			proceed, blindNew     bool
			degGot, unhGot        *int64 // microseconds
			blindFrom, blindUntil *time.Time
		)
		// One replica sweeps at a time: the sweep holds a transaction
		// lock (sweepLockClass) until it ends, as mcp_sweep_guarded's one
		// transaction holds the guard's row on plain PostgreSQL; a
		// replica whose sweep begins meanwhile does not proceed. (With the
		// guard's row alone, let go when the guard ends, every replica
		// swept: each swept every tenant due, doubling the work, and their
		// calls fought over the tenants' rows; with 300 tenants due at 1 s
		// they ran out of time at every sweep, a black-box run,
		// 2026-12-06.) The guard itself commits at once, so that the
		// sweep's start is recorded even if its replica dies before the
		// end: with the guard held to the end, the survivor of a replica
		// killed while sweeping opened a blind window.
		sweeping, err := s.pool.Begin(ctx)
		if err != nil {
			return res, translate(err)
		}
		defer func() {
			// Ended however the sweep ends: its own time may be gone.
			ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sweepLockEndTimeout)
			defer cancel()
			_ = sweeping.Rollback(ectx)
		}()
		if err := sweeping.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, $2)`, sweepLockClass, sweepLockObject).
			Scan(&proceed); err != nil {
			return res, translate(err)
		}
		if proceed {
			err = s.pool.QueryRow(ctx, `
SELECT proceed, (extract(epoch FROM degraded_after) * 1000000)::bigint,
       (extract(epoch FROM unhealthy_after) * 1000000)::bigint, blind_from, blind_until, blind_new
FROM mcp_sweep_guard($1::timestamptz, $2::bigint * interval '1 microsecond', $3::bigint * interval '1 microsecond',
                     $4::bigint * interval '1 microsecond')`, at, deg, unh, req.BlindAfter.Microseconds()).
				Scan(&proceed, &degGot, &unhGot, &blindFrom, &blindUntil, &blindNew)
			if err != nil {
				return res, translate(err)
			}
		}
		if !proceed {
			// Another replica is sweeping now. A replica that has never
			// read the tenants learns them, so that it can sweep the
			// others' if a worker stops before it wins a sweep.
			s.learnSweepTenants(ctx)
			return res, nil
		}
		if blindNew && blindFrom != nil && blindUntil != nil {
			res.Opened = &store.BlindWindow{From: blindFrom.UTC(), Until: blindUntil.UTC()}
		}
		if degGot != nil && unhGot != nil {
			degLag, unhLag = *degGot, *unhGot
		}
	}
	// A sweep that runs out of its time may have waited for a worker that
	// hangs: the next sweeps skip a worker that its probe finds so
	// (sweepprobe.go).
	defer func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.probeWorkersInBackground()
		}
	}()
	hung := s.hungWorkers()
	// A replica that has read no list yet sweeps the saved one if the
	// read fails or hangs (sweeplist.go): it is its list before the read.
	s.loadSavedSweepTenants(ctx)
	s.engineMu.Lock()
	previous := s.sweptTenants
	s.engineMu.Unlock()
	tenants, fresh, err := s.sweepTenants(ctx, len(hung) > 0)
	if fresh {
		s.unswept.read(tenants)
	} else {
		s.unswept.unread(failedAt, previous)
	}
	if err != nil {
		return res, err
	}
	// Every tenant of the list is this sweep's: those marked swept or
	// found with nothing due count as swept, those skipped as failed.
	listed := len(tenants)
	var (
		left          = req.Limit
		tried, failed int
		skipped       int
		firstErr      error
		cut           bool
		failedTenants []uuid.UUID
		reached       []uuid.UUID
	)
	if len(req.Skip) > 0 {
		s.unswept.failed(req.Skip, failedAt)
		tenants, skipped = withoutTenants(tenants, req.Skip)
	}
	// The tenants' workers, from the coordinator's metadata: a worker that
	// hangs is called once a sweep. Unknown (the read failed): each tenant
	// is called.
	workers := &sweepWorkers{}
	workers.of, _ = s.tenantWorkers(ctx, tenantKeys(tenants))
	if workers.of == nil && len(hung) > 0 {
		// A worker hangs and which tenants are its is not known: a
		// write to one of them would run when it thaws, and close the
		// blind window its tenants' outage opened.
		s.unswept.failed(tenants, failedAt)
		return res, fmt.Errorf("%w: the tenants' Citus workers unread while a worker hangs", registry.ErrUnavailable)
	}
	if !fresh {
		// A list read now had every worker answer: the probe would ask
		// again what that read just told.
		s.probeWorkers(ctx, tenants, workers, hung)
	}
	if req.BlindAfter > 0 {
		// A tenant back from a long failure is marked swept at its
		// first failure (unswept.go), before any sweep of it.
		var unmarked []uuid.UUID
		tenants, unmarked, err = s.markUnswept(ctx, at, req.BlindAfter, tenants, workers)
		if len(unmarked) > 0 {
			failed += len(unmarked)
			tried += len(unmarked)
			firstErr = err
		}
	}
	// The tenants whose sweep failed, or whose worker did not answer
	// (called or not), are remembered; those marked swept or swept by a
	// call of their own (reached) forgotten (unswept.go).
	reachable := tenants
	defer func() {
		for _, t := range leaveOut(reachable, failedTenants) {
			if workers.failure(t) != nil {
				failedTenants = append(failedTenants, t)
			}
		}
		s.unswept.failed(failedTenants, failedAt)
		s.unswept.swept(leaveOut(reached, failedTenants))
	}()
	if req.BlindAfter > 0 {
		// Run before the sweep's lock is let go (deferred earlier).
		defer s.markReached(ctx, at, started, req, tenants, workers, deg, unh)
	}
	if req.Limit > 0 && (fresh || workers.of != nil) {
		// A list read now: every shard answers, so the due read can too.
		// The last list (a worker down): the due read of the tenants of
		// the workers that answer.
		var marked []uuid.UUID
		tenants, marked = s.sweepDue(ctx, tenants, fresh, at, degLag, unhLag, req.BlindAfter, workers)
		reached = append(reached, marked...)
	}
	// One call per worker for its tenants, again for those a round left
	// while the round moved any (the limit of its calls reached); those
	// left by a round that moved none (held rows, a failed call) are swept
	// one by one below.
	for workers.of != nil && len(tenants) > 1 && left > 0 && ctx.Err() == nil {
		var grouped []registry.Event
		grouped, tenants = s.sweepGroups(ctx, tenants, at, degLag, unhLag, left, req.BlindAfter, workers)
		res.Events = append(res.Events, grouped...)
		left -= len(grouped)
		if len(grouped) == 0 {
			break
		}
	}
	type swept struct {
		tenant uuid.UUID
		events []registry.Event
		err    error
		limit  int // the call's limit: all of it moved, the tenant may have more due
	}
	// sweep makes one call of tenant's sweep, of at most want transitions
	// and of the calls' present size (sweepCallSize).
	sweep := func(tenant uuid.UUID, want int) swept {
		if err := workers.failure(tenant); err != nil {
			return swept{tenant: tenant, err: err}
		}
		var r swept
		s.sweepCalls.timed(ctx, want, func(limit int) (int, error) {
			evs, hung, err := s.sweepTenant(ctx, tenant, at, degLag, unhLag, limit, req.BlindAfter)
			if hung {
				workers.fail(tenant, err)
			}
			r = swept{tenant, evs, err, limit}
			return len(evs), err
		})
		return r
	}
	// take adds a call's transitions to res, or counts its tenant as
	// failed: once at most, as a tenant whose call failed is not called
	// again (one whose second call fails has its first call's in res).
	take := func(r swept) {
		if r.err != nil {
			failed++
			firstErr = cmp.Or(firstErr, translate(r.err))
			failedTenants = append(failedTenants, r.tenant)
			return
		}
		res.Events = append(res.Events, r.events...)
		left -= len(r.events)
		reached = append(reached, r.tenant)
	}
	// The tenants in chunks of at most what is left of the limit: first
	// every tenant of the chunk at once (tenantParallelism at a time), each
	// for its share of what is left, in one call; then, one after another,
	// those whose call moved all it could (they may have more due), in
	// calls while the limit and the time last. The sweep never moves more
	// than the limit, and it comes back short only when no tenant has more
	// due. Each call commits its own transitions (sweepCallSize).
	for rest := tenants; len(rest) > 0 && left > 0; {
		if cut = ctx.Err() != nil; cut {
			break
		}
		chunk := rest[:min(len(rest), left)]
		rest = rest[len(chunk):]
		tried += len(chunk)
		share := left / len(chunk)
		results := make([]swept, len(chunk))
		eachTenant(len(chunk), func(i int) { results[i] = sweep(chunk[i], share) })
		var more []uuid.UUID
		for i, r := range results {
			take(r)
			if r.err == nil && len(r.events) == r.limit {
				more = append(more, chunk[i])
			}
		}
	again:
		for _, tenant := range more {
			for {
				if left <= 0 {
					break again
				}
				if cut = ctx.Err() != nil; cut {
					break again
				}
				r := sweep(tenant, left)
				take(r)
				if r.err != nil || len(r.events) < r.limit {
					break
				}
			}
		}
	}
	// Cut short by the context (the sweep's timeout): an error, so that
	// the monitor does not read the short result as nothing more due.
	if ctx.Err() != nil && (cut || failed > 0) {
		return res, translate(ctx.Err())
	}
	// Skipped tenants count as failed ones; the error is a call's, when
	// one failed.
	if skipped > 0 {
		failed += skipped
		tried += skipped
		firstErr = cmp.Or(firstErr, errHeldUnwritten)
	}
	// Some tenants swept (or marked), or some transitions committed, and
	// then a failure: partial.
	if firstErr != nil && (failed < max(tried, listed) || len(res.Events) > 0) {
		return res, &registry.PartialError{Failed: failed, Tenants: max(tried, listed), Err: firstErr}
	}
	return res, firstErr
}

// errHeldUnwritten fails the sweep of a tenant skipped
// (store.SweepRequest.Skip).
var errHeldUnwritten = fmt.Errorf("%w: the tenant's heartbeats answered are not written yet", registry.ErrUnavailable)

// withoutTenants returns tenants without those of skip, and how many it
// left out.
func withoutTenants(tenants, skip []uuid.UUID) ([]uuid.UUID, int) {
	left := make(map[uuid.UUID]bool, len(skip))
	for _, t := range skip {
		left[t] = true
	}
	out := make([]uuid.UUID, 0, len(tenants))
	for _, t := range tenants {
		if !left[t] {
			out = append(out, t)
		}
	}
	return out, len(tenants) - len(out)
}

// The transaction-level advisory lock that a Citus sweep holds while it
// sweeps (sweepPerTenant), in the two-key space, apart from
// golang-migrate's one-key lock: "mcpd" and 1.
const (
	sweepLockClass  int32 = 0x6d637064
	sweepLockObject int32 = 1
)

// sweepLockEndTimeout bounds the end of the transaction that holds a Citus
// sweep's lock, which ends after the sweep's own time may have run out.
const sweepLockEndTimeout = 2 * time.Second

// sweepTenants lists the tenants that have live servers: a read of every
// shard, which fails while a worker is down; then the last list read is
// swept (the tenants registered since wait for the worker), and fresh is
// false. While a worker hangs (hung: hungWorkers), the last list is swept
// without a read.
func (s *Store) sweepTenants(ctx context.Context, hung bool) (tenants []uuid.UUID, fresh bool, err error) {
	if hung {
		// A silent or hung worker (stall.go, sweepprobe.go) would hold
		// the read for as long as the sweep lasts: a sweep too short for
		// workerShare would fail whole. The last list read is swept
		// instead.
		s.engineMu.Lock()
		known := s.sweptTenants
		s.engineMu.Unlock()
		if known != nil {
			return known, false, nil
		}
	}
	tenants, err = s.readSweepTenants(ctx)
	s.engineMu.Lock()
	defer s.engineMu.Unlock()
	if err != nil {
		if s.sweptTenants == nil || ctx.Err() != nil {
			return nil, false, translate(err)
		}
		return s.sweptTenants, false, nil
	}
	// readSweepTenants made it the last list.
	return tenants, true, nil
}

// dueMargin is how much earlier than its lag sweepDue reads a server as
// due: more than the clocks of a Citus cluster's nodes differ by, so that
// a worker whose clock is ahead of the coordinator's has its tenants'
// servers moved on time; a tenant read as due too early is swept and
// nothing moves.
const dueMargin = time.Second

// sweepDue returns the tenants of tenants to sweep: those with a server
// due (mcp_sweep_due, one read of every shard; not fresh, the list the
// last one read while a worker is down: mcp_sweep_due_of, a read of the
// shards of the tenants whose workers answered the probe, the others all
// returned), and those of a worker that it could not mark swept. When
// blindAfter is set it marks every tenant of each worker that answers
// swept at at, those due too, in one call per worker
// (mcp_sweep_mark_group), keeping their blind windows as a sweep of each
// would: a tenant due whose own call the sweep does not reach (its time or
// limit ran out) is no less seen, and a later sweep does not take it for
// blind. (Marking only the tenants with nothing due let a backlog of many
// tenants due at a short interval never move: each tenant, swept less
// often than blindAfter, opened a blind window at every sweep of its own;
// found by a black-box run of 300 tenants at 1 s, 2026-12-06.) When the
// read fails, every tenant: each is swept or fails on its own. (Every
// tenant was also what a sweep with a worker down swept: with thousands of
// tenants, more than a sweep's time, and none of the tenants of the worker
// that answered moved while the other was down; found by a black-box run,
// 2026-12-06.) deg and unh are the lags in microseconds. A worker that did
// not answer (workers) gets no mark, and one whose mark hangs is recorded
// there; their tenants are among those returned. marked are the tenants
// marked swept.
func (s *Store) sweepDue(ctx context.Context, tenants []uuid.UUID, fresh bool, at *time.Time, deg, unh int64,
	blindAfter time.Duration, workers *sweepWorkers) (due, marked []uuid.UUID) {
	if len(tenants) == 0 {
		return tenants, nil
	}
	// Not fresh: the tenants of the workers that answered are read, the
	// others (a worker down, or not known) are each swept, or fail, on
	// their own, as if due.
	var answered, unread []uuid.UUID
	if !fresh {
		for _, t := range tenants {
			if workers.answered(t) {
				answered = append(answered, t)
			} else {
				unread = append(unread, t)
			}
		}
	}
	// A second early: the read is on the coordinator's clock, and each
	// tenant's own sweep decides on its worker's.
	margin := dueMargin.Microseconds()
	var read []uuid.UUID
	if _, err := s.onWorkerConn(ctx, false, func(sctx context.Context, c *pgxpool.Conn) error {
		var (
			rows pgx.Rows
			err  error
		)
		if fresh {
			rows, err = c.Query(sctx, `
SELECT tenant_id FROM mcp_sweep_due($1::timestamptz, $2::bigint * interval '1 microsecond',
                                    $3::bigint * interval '1 microsecond')`, at, max(deg-margin, 0), max(unh-margin, 0))
		} else {
			rows, err = c.Query(sctx, `
SELECT tenant_id FROM mcp_sweep_due_of($1::uuid[], $2::timestamptz, $3::bigint * interval '1 microsecond',
                                       $4::bigint * interval '1 microsecond')`,
				answered, at, max(deg-margin, 0), max(unh-margin, 0))
		}
		if err == nil {
			read, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		}
		return err
	}); err != nil {
		return tenants, nil
	}
	isDue := make(map[uuid.UUID]bool, len(read)+len(unread))
	for _, t := range read {
		isDue[t] = true
	}
	for _, t := range unread {
		isDue[t] = true
	}
	for _, t := range tenants {
		if isDue[t] {
			due = append(due, t)
		}
	}
	if blindAfter <= 0 {
		return due, nil
	}
	groups, err := s.workerGroups(ctx, tenantKeys(tenants))
	if err != nil {
		return tenants, nil
	}
	// unmarked adds the tenants of group that are not due to those swept
	// one by one.
	unmarked := func(group []batchKey) {
		for _, p := range group {
			if !isDue[p.tenant] {
				due = append(due, p.tenant)
			}
		}
	}
	// A worker that did not answer its probe (or was not probed) gets no
	// mark: its tenants go with those due, each to fail with it.
	live := groups[:0]
	for _, g := range groups {
		if workers.of == nil || workers.failure(g[0].tenant) != nil {
			unmarked(g)
			continue
		}
		live = append(live, g)
	}
	groups = live
	errs := s.markSwept(ctx, groups, at, blindAfter, workers)
	for g, err := range errs {
		if err != nil {
			// Unmarked: swept one by one.
			unmarked(groups[g])
			continue
		}
		marked = append(marked, keyTenants(groups[g])...)
	}
	return due, marked
}

// markSwept marks the tenants of each group (those of one worker) swept at
// at, in one call per worker (mcp_sweep_mark_group), and returns each
// call's error: a tenant whose last mark is older than blindAfter before at
// gets a blind window that ends at at. A worker whose call hangs is
// recorded in workers.
func (s *Store) markSwept(ctx context.Context, groups [][]batchKey, at *time.Time, blindAfter time.Duration,
	workers *sweepWorkers) []error {
	return s.callWorkers(ctx, groups, func(g int) error {
		group := keyTenants(groups[g])
		hung, err := s.onWorkerConn(ctx, true, func(sctx context.Context, c *pgxpool.Conn) error {
			_, err := c.Exec(sctx, `SELECT mcp_sweep_mark_group($1::uuid, $2::uuid[], $3::timestamptz,
				$4::bigint * interval '1 microsecond')`, group[0], group, at, blindAfter.Microseconds())
			return err
		})
		if hung {
			workers.fail(group[0], err)
		}
		return err
	})
}

// A long sweep on Citus. The guard (mcp_sweep_guard) and the tenants'
// marks (mcp_sweep_mark_group, mcp_sweep_tenant) record when a sweep
// began, and the next sweep measures its gap from there. A sweep that
// takes its whole time (the interval, at least a second: a backlog of
// thousands of tenants due at once, whose calls run through Citus's
// planner on the workers) ends a period or less before the next begins,
// which therefore begins more than BlindAfter after it began: each such
// sweep opened a blind window, after which no server moved away from
// healthy for 2I, and the backlog held itself back (a black-box run,
// 2026-12-06: 3,000 tenants with a silent server each, none unhealthy 70 s
// after their last heartbeat at a 1 s interval). Yet a sweep that reaches
// the database all along is no blind registry. So a sweep that took
// sweepReachedShare of BlindAfter or more marks again when it ends: the
// guard, and the tenants of each worker that answered throughout and
// answers a probe again, at the end's time, with BlindAfter lengthened by
// the sweep's own time, so that a window opens only for a gap that was
// one before the sweep began. The tenants of a worker that did not answer
// get no mark, and keep their gap.

// sweepReachedShare is the share of BlindAfter from which a sweep marks
// again at its end (see above): the default BlindAfter is two periods, so
// a sweep shorter than half of it leaves the next to begin within it.
const sweepReachedShare = 2 // BlindAfter / sweepReachedShare

// markReached marks the guard and tenants (those of the workers that
// answered) swept at the sweep's end, when it took sweepReachedShare of
// req.BlindAfter or more: see above. at is the sweep's time and started
// when this process began it; deg and unh are the lags in microseconds.
func (s *Store) markReached(ctx context.Context, at *time.Time, started time.Time, req store.SweepRequest,
	tenants []uuid.UUID, workers *sweepWorkers, deg, unh int64) {
	end := s.now()
	var took time.Duration
	switch {
	case at != nil && end != nil:
		took = end.Sub(*at) // the store's clock
	case at == nil && end == nil:
		took = time.Since(started) // the database's, as this process saw it pass
	default:
		return // a request's time without a clock of the store: no end to tell
	}
	if req.BlindAfter <= 0 || took < req.BlindAfter/sweepReachedShare {
		return
	}
	blindAfter := req.BlindAfter + took
	// Its own time: the sweep's may be gone. Still within the sweep's
	// lock, so that no other replica's sweep begins before the marks.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sweepLockEndTimeout)
	defer cancel()
	if workers.of != nil {
		// Each worker is asked again first: one that stopped answering
		// since the sweep began gets no mark (sent to a worker that
		// hangs, a mark runs when it thaws, and closes the blind window
		// its tenants' outage opened).
		s.probeWorkers(ctx, tenants, workers, s.hungWorkers())
		// By the workers the sweep read for its tenants.
		var live [][]batchKey
		for _, g := range groupPairs(tenantKeys(tenants), func(p batchKey) int64 { return workers.of[p.tenant] }) {
			if workers.failure(g[0].tenant) == nil {
				live = append(live, g)
			}
		}
		s.markSwept(ctx, live, end, blindAfter, workers)
	}
	if _, err := s.pool.Exec(ctx, `
SELECT 1 FROM mcp_sweep_guard($1::timestamptz, $2::bigint * interval '1 microsecond',
                              $3::bigint * interval '1 microsecond', $4::bigint * interval '1 microsecond')`,
		end, deg, unh, blindAfter.Microseconds()); err != nil {
		s.logger.Info("sweep: marking its end failed", "error", err)
	}
}

// probeWorkers reads a tenant's position on each known worker of tenants,
// side by side, each read within its workerShare of ctx, and records in
// workers each worker that does not answer, and without a read each of
// hung (hungWorkers): a sweep too short for workerShare would wait for it
// to the end. The sweep sends no write to such a worker:
// a statement sent to a worker that hangs runs when the worker thaws, long
// after the sweep gave up on it, and its mark (the tenant's last sweep)
// would close the blind window that the outage opened for the worker's
// tenants. A read that runs late harms nothing.
func (s *Store) probeWorkers(ctx context.Context, tenants []uuid.UUID, workers *sweepWorkers, hung map[int64]bool) {
	seen := make(map[int64]bool)
	var probe []uuid.UUID // a tenant of each worker
	for _, t := range tenants {
		if w, known := workers.worker(t); known && !seen[w] {
			seen[w] = true
			if hung[w] {
				workers.fail(t, ErrWorkerStalled)
				continue
			}
			probe = append(probe, t)
		}
	}
	eachTenant(len(probe), func(i int) {
		if _, err := s.onWorkerConn(ctx, false, func(sctx context.Context, c *pgxpool.Conn) error {
			var epoch, pos int64
			return c.QueryRow(sctx, horizonSQL, probe[i]).Scan(&epoch, &pos)
		}); err != nil && ctx.Err() == nil {
			workers.fail(probe[i], translate(err))
		}
	})
}

// tenantKeys are tenants as the keys of tenantWorkers.
func tenantKeys(tenants []uuid.UUID) []batchKey {
	keys := make([]batchKey, len(tenants))
	for i, t := range tenants {
		keys[i] = batchKey{tenant: t}
	}
	return keys
}

// keyTenants are the tenants of keys, in order: tenantKeys undone.
func keyTenants(keys []batchKey) []uuid.UUID {
	tenants := make([]uuid.UUID, len(keys))
	for i, k := range keys {
		tenants[i] = k.tenant
	}
	return tenants
}

// learnSweepTenants reads the tenants to sweep when no list was read yet;
// a failure leaves it for the next sweep.
func (s *Store) learnSweepTenants(ctx context.Context) {
	s.engineMu.Lock()
	known := s.sweptTenants != nil
	s.engineMu.Unlock()
	if !known {
		// A replica started while a worker is down or hangs falls back
		// on the list saved last (sweeplist.go).
		s.loadSavedSweepTenants(ctx)
		_, _, _ = s.sweepTenants(ctx, false)
	}
}

// learnSweptTenant adds tenant, which now has a live server, to the last
// list of tenants the sweep read, when it is not in it: while a worker
// hangs or is down, the read of every shard fails and the sweep sweeps
// that list, so that a tenant registered since the last read (on a worker
// that answers) was never swept while the other worker hung (a test of a
// hung worker, 2026-12-07: every server was registered after the last
// read). Another replica's registrations are not learnt here: they wait
// for a read of every shard.
func (s *Store) learnSweptTenant(tenant uuid.UUID) {
	s.engineMu.Lock()
	defer s.engineMu.Unlock()
	if s.sweptTenants == nil || slices.Contains(s.sweptTenants, tenant) {
		return
	}
	// A new array: sweeps may hold the list.
	s.sweptTenants = append(slices.Clip(s.sweptTenants), tenant)
}

// sweepTenant sweeps one tenant's servers in a transaction of its own,
// behind the tenant's own blind window with blindAfter (0019), within its
// workerShare of ctx; hung reports that its worker hangs (hungWorker). deg
// and unh are the lags in microseconds.
func (s *Store) sweepTenant(ctx context.Context, tenant uuid.UUID, at *time.Time, deg, unh int64, limit int, blindAfter time.Duration) (evs []registry.Event, hung bool, err error) {
	hung, err = s.onWorkerConn(ctx, true, func(sctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(sctx, `
SELECT 0::bigint, event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at, body
FROM mcp_sweep_tenant($1::uuid, $2::timestamptz, $3::bigint * interval '1 microsecond',
                      $4::bigint * interval '1 microsecond', $5, $6::bigint * interval '1 microsecond')`,
			tenant, at, deg, unh, limit, blindAfter.Microseconds())
		if err == nil {
			evs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (registry.Event, error) { return scanEvent(row) })
		}
		return err
	})
	return evs, hung, err
}

// sweepGroups sweeps tenants in one call per worker (mcp_sweep_group), the
// workers' calls side by side, each of at most its share of limit and of
// the calls' present size (sweepCallSize): a worker with hundreds of
// tenants due gets one call and one transaction a sweep, where a call for
// each tenant did not fit in a sweep of a second (a black-box run of 300
// tenants due at 1 s, 2026-12-06). It returns the transitions made, and
// the tenants left to sweep one by one: those a call left (rows another
// transaction held, the limit reached, more due than it moved), those of
// a call that failed, and those of a worker that did not answer or is not
// known, and a worker's one tenant (its own call costs no more). deg and
// unh are the lags in microseconds.
func (s *Store) sweepGroups(ctx context.Context, tenants []uuid.UUID, at *time.Time, deg, unh int64, limit int,
	blindAfter time.Duration, workers *sweepWorkers) (evs []registry.Event, rest []uuid.UUID) {
	groups, err := s.workerGroups(ctx, tenantKeys(tenants))
	if err != nil {
		return nil, tenants
	}
	live := groups[:0]
	for _, g := range groups {
		if !workers.answered(g[0].tenant) || len(g) < 2 {
			rest = append(rest, keyTenants(g)...)
			continue
		}
		live = append(live, g)
	}
	groups = live
	if len(groups) == 0 {
		return nil, rest
	}
	share := max(limit/len(groups), 1)
	moved := make([][]registry.Event, len(groups))
	left := make([][]uuid.UUID, len(groups))
	s.callWorkers(ctx, groups, func(g int) error {
		group := keyTenants(groups[g])
		var err error
		s.sweepCalls.timed(ctx, share, func(limit int) (int, error) {
			var hung bool
			moved[g], left[g], hung, err = s.sweepGroup(ctx, group, at, deg, unh, limit, blindAfter)
			if hung {
				workers.fail(group[0], err)
			}
			return len(moved[g]), err
		})
		if err != nil {
			moved[g], left[g] = nil, group
		}
		return err
	})
	for g := range groups {
		evs = append(evs, moved[g]...)
		rest = append(rest, left[g]...)
	}
	return evs, rest
}

// sweepGroup makes one call of mcp_sweep_group for tenants, all of one
// worker, of at most limit transitions, within its workerShare of ctx: the
// transitions made, the tenants the call left, and whether the worker
// hangs (hungWorker).
func (s *Store) sweepGroup(ctx context.Context, tenants []uuid.UUID, at *time.Time, deg, unh int64, limit int,
	blindAfter time.Duration) (evs []registry.Event, left []uuid.UUID, hung bool, err error) {
	hung, err = s.onWorkerConn(ctx, true, func(sctx context.Context, c *pgxpool.Conn) error {
		evs, left = nil, nil
		rows, err := c.Query(sctx, `
SELECT event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at, body
FROM mcp_sweep_group($1::uuid, $2::uuid[], $3::timestamptz, $4::bigint * interval '1 microsecond',
                     $5::bigint * interval '1 microsecond', $6, $7::bigint * interval '1 microsecond')`,
			tenants[0], tenants, at, deg, unh, limit, blindAfter.Microseconds())
		if err != nil {
			return err
		}
		var r eventRow
		dest := r.appendDestNoSeq(make([]any, 0, 10))
		_, err = pgx.ForEachRow(rows, dest, func() error {
			ev, ok, err := r.event()
			switch {
			case err != nil:
				return err
			case ok:
				evs = append(evs, ev)
			case r.tenant != nil:
				left = append(left, *r.tenant)
			}
			return nil
		})
		return err
	})
	return evs, left, hung, err
}

// LiveCounts counts the given tenants' servers that are not deregistered.
func (s *Store) LiveCounts(ctx context.Context, tenants []uuid.UUID) (map[uuid.UUID]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT tenant_id, live FROM mcp_live_counts($1)`, tenants)
	if err != nil {
		return nil, translate(err)
	}
	out := make(map[uuid.UUID]int64, len(tenants))
	var (
		tenant uuid.UUID
		n      int64
	)
	_, err = pgx.ForEachRow(rows, []any{&tenant, &n}, func() error {
		out[tenant] = n
		return nil
	})
	return out, translate(err)
}

// degradedLag and unhealthyLag are the silences after which a sweep moves
// a server: 2I and 3I, each plus the held heartbeats' grace.
func degradedLag(req store.SweepRequest) time.Duration {
	return registry.DegradedAfter(req.Interval) + max(req.Grace, 0)
}

func unhealthyLag(req store.SweepRequest) time.Duration {
	return registry.UnhealthyAfter(req.Interval) + max(req.Grace, 0)
}
