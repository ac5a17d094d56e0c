package pgstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Alerts while a Citus worker is down. The alert dispatcher's reads span
// every tenant: the claim, the unhealthy servers and a destination's
// firing skill alerts each read every shard, and fail while any worker is
// down or hangs, so that no tenant's alert was delivered until it
// returned. Such a read is then made per worker instead, for the tenants
// the store knows (alertWorkTenants), with the functions *_of (migration
// 0032) whose filter on the distribution column reaches that worker's
// shards alone; the workers that answer are read, the others left:
//
//   - the claim gets the answering workers' tenants' events, in the
//     claim's order; the others' wait for their worker (late, not lost:
//     their positions do not move);
//   - the unhealthy servers and the firing skill alerts are the answering
//     workers' tenants', with a *store.PartialReadError that names the
//     other tenants (the dispatcher keeps what it last read of them).
//
// The tenants known are the sweep's last list (those with live servers
// when it was read, by this replica or, for one started since, by the
// replica that saved it: sweeplist.go) and those of the alert events,
// unhealthy servers and firing skill alerts this store read before: a
// tenant not among them (registered through another replica since the
// list was read, or with no live server and never read here) waits for
// the worker to return, as every tenant did before.

// alertReadTimeout bounds a read of the unhealthy servers or the firing
// skill alerts, and each of its reads per worker: a worker that hangs
// before it is known to (hungWorkers) would hold the read, and the
// destination's round, for as long as TCP waits.
const alertReadTimeout = claimTimeout

// alertTenants are the tenants with alert work that the store has read,
// on Citus.
type alertTenants struct {
	mu   sync.Mutex
	seen map[uuid.UUID]struct{}
}

// saw records tenants as having alert work.
func (a *alertTenants) saw(tenants ...uuid.UUID) {
	if len(tenants) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seen = make(map[uuid.UUID]struct{})
	}
	for _, t := range tenants {
		a.seen[t] = struct{}{}
	}
}

// sawTenantsOf records, on Citus, the tenants of rows (tenant(i) of each
// i below n) as having alert work.
func (s *Store) sawTenantsOf(n int, tenant func(i int) uuid.UUID) {
	s.engineMu.Lock()
	citus := s.engineKnown && s.citus
	s.engineMu.Unlock()
	if !citus || n == 0 {
		return
	}
	tenants := make([]uuid.UUID, 0, n)
	for i := range n {
		if t := tenant(i); len(tenants) == 0 || tenants[len(tenants)-1] != t {
			tenants = append(tenants, t)
		}
	}
	s.alertTenants.saw(tenants...)
}

// alertWorkTenants returns the tenants known to have or have had alert
// work: the sweep's last list, and those alertTenants saw.
func (s *Store) alertWorkTenants() []uuid.UUID {
	s.engineMu.Lock()
	out := slices.Clone(s.sweptTenants)
	s.engineMu.Unlock()
	a := &s.alertTenants
	a.mu.Lock()
	for t := range a.seen {
		out = append(out, t)
	}
	a.mu.Unlock()
	return sortedTenants(out)
}

// alertReadOf is one worker's answer to a read of its tenants.
type alertReadOf[T any] struct {
	rows []T
	err  error
}

// readWorkersOf reads tenants per Citus worker, the workers side by side,
// with read(ctx, tenants of one worker), each a counted call of its worker
// (workerCalls); a worker that hangs (hungWorkers) is not called, and a
// call is waited for at most the stall time (awaitWorkers). It returns
// the answers of the workers that answered, the tenants of those that
// did not (with those whose worker is not known) and the first error of
// those.
func readWorkersOf[T any](ctx context.Context, s *Store, tenants []uuid.UUID,
	read func(ctx context.Context, tenants []uuid.UUID) ([]T, error),
) (answers [][]T, unanswered []uuid.UUID, firstErr error) {
	order, index := s.tenantsByWorker(ctx, tenants)
	hung := s.hungWorkers()
	var (
		calls   [][]uuid.UUID
		workers []int64
	)
	for _, w := range order {
		of := make([]uuid.UUID, len(index[w]))
		for j, i := range index[w] {
			of[j] = tenants[i]
		}
		if w < 0 {
			unanswered = append(unanswered, of...)
			firstErr = cmp.Or(firstErr, errWorkersUnknown)
			continue
		}
		if hung[w] {
			unanswered = append(unanswered, of...)
			firstErr = cmp.Or(firstErr, ErrWorkerStalled)
			continue
		}
		calls, workers = append(calls, of), append(workers, w)
	}
	results, done := awaitWorkers(ctx, s.workerCalls.stall, len(calls),
		func(wctx context.Context, g int) alertReadOf[T] {
			// Counted as the worker's other calls (stall.go): a call
			// that stalls has the worker probed, and one to a worker
			// found hung meanwhile ends.
			var rows []T
			err := s.workerCalls.onWorker(wctx, workers[g], calls[g][0], func(cctx context.Context) error {
				var err error
				rows, err = read(cctx, calls[g])
				return err
			})
			return alertReadOf[T]{rows, err}
		})
	for g, of := range calls {
		switch {
		case !done[g]:
			unanswered = append(unanswered, of...)
			firstErr = cmp.Or(firstErr, cmp.Or(translate(ctx.Err()), ErrWorkerStalled))
		case results[g].err != nil:
			unanswered = append(unanswered, of...)
			firstErr = cmp.Or(firstErr, translate(results[g].err))
		default:
			answers = append(answers, results[g].rows)
		}
	}
	return answers, unanswered, firstErr
}

// errWorkersUnknown is the failure of the tenants whose Citus worker could
// not be read from the coordinator's metadata.
var errWorkersUnknown = fmt.Errorf("%w: the tenants' Citus workers could not be read from the coordinator",
	registry.ErrUnavailable)

// perWorkerAlerts reports whether a read of every tenant's alert work
// that failed with err is to be made per worker instead: on Citus, for a
// fault that may be a worker's.
func (s *Store) perWorkerAlerts(ctx context.Context, err error) bool {
	if !workerFault(err) || ctx.Err() != nil {
		return false
	}
	citus, cerr := s.onCitus(ctx)
	return cerr == nil && citus
}

// workerHangs reports whether, on Citus, a worker is known not to answer:
// a read of every shard would wait for it.
func (s *Store) workerHangs(ctx context.Context) bool {
	s.engineMu.Lock()
	citus := s.engineKnown && s.citus
	s.engineMu.Unlock()
	return citus && len(s.hungWorkers()) > 0
}

// claimAlertsPerWorker is ClaimAlerts of the tenants of the workers that
// answer: the lease alone, then each worker's tenants' events
// (mcp_alert_claim_of), merged in the claim's order and cut at limit.
// Each worker's answer holds the first events of each of its tenants, and
// so does the merge. It fails when no worker it called answered; with no
// tenant known it claims nothing.
func (s *Store) claimAlertsPerWorker(ctx context.Context, destination string, limit int) (store.AlertClaim, error) {
	claim := &alertClaim{pool: s.pool, destination: destination, claimant: uuid.New()}
	// As ClaimAlerts: not cut by the caller's context.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	var leased bool
	if err := s.pool.QueryRow(bctx, `SELECT mcp_alert_lease($1, $2, $3)`,
		destination, claim.claimant, AlertLease).Scan(&leased); err != nil {
		claim.Release(ctx)
		return nil, translate(err)
	}
	if !leased {
		return nil, nil
	}
	tenants := s.alertWorkTenants()
	answers, unanswered, err := readWorkersOf(bctx, s, tenants,
		func(wctx context.Context, of []uuid.UUID) ([]registry.Event, error) {
			rows, err := s.pool.Query(wctx, `
SELECT event_position, seq, event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
       trace_id, occurred_at, body
FROM mcp_alert_claim_of($1, $2, $3, $4)`, destination, claim.claimant, limit, of)
			if err != nil {
				return nil, err
			}
			return scanClaimRows(rows)
		})
	if len(answers) == 0 && len(unanswered) > 0 {
		claim.Release(ctx)
		return nil, err
	}
	if len(unanswered) > 0 {
		s.logger.DebugContext(ctx, "alerts claimed of the Citus workers that answer", "destination", destination,
			"tenants_waiting", len(unanswered), "err", err)
	}
	claim.events = mergeClaimed(answers, limit)
	s.sawTenantsOf(len(claim.events), func(i int) uuid.UUID { return claim.events[i].TenantID })
	return claim, nil
}

// mergeClaimed merges the answers of mcp_alert_claim_of, each in the
// claim's order (the latest time of the tenant's events up to the event,
// then tenant, then position) and of tenants of its own, into that order,
// and cuts the result at limit.
func mergeClaimed(answers [][]registry.Event, limit int) []registry.Event {
	type keyed struct {
		ev         registry.Event
		tenantTime time.Time
	}
	var all []keyed
	for _, events := range answers {
		latest := make(map[uuid.UUID]time.Time)
		for _, ev := range events {
			t := latest[ev.TenantID]
			if ev.OccurredAt.After(t) {
				t = ev.OccurredAt
			}
			latest[ev.TenantID] = t
			all = append(all, keyed{ev, t})
		}
	}
	slices.SortStableFunc(all, func(a, b keyed) int {
		if c := a.tenantTime.Compare(b.tenantTime); c != 0 {
			return c
		}
		if c := bytes.Compare(a.ev.TenantID[:], b.ev.TenantID[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.ev.Position.Seq, b.ev.Position.Seq)
	})
	out := make([]registry.Event, 0, min(len(all), max(limit, 0)))
	for _, k := range all[:min(len(all), max(limit, 0))] {
		out = append(out, k.ev)
	}
	return out
}

// readAlertRows is a read of every tenant's alert state: all, with args,
// bounded by alertReadTimeout. On Citus, while a worker is down or known
// to hang, it is made per worker instead (of, with args and the worker's
// tenants last), for the tenants the store knows, and the answering
// workers' rows come with a *store.PartialReadError naming the others.
// tenantOf is a row's tenant, which the store then knows.
func readAlertRows[T any](ctx context.Context, s *Store, all, of string, args []any,
	scan pgx.RowToFunc[T], tenantOf func(T) uuid.UUID,
) ([]T, error) {
	full := ErrWorkerStalled
	if !s.workerHangs(ctx) {
		rctx, cancel := context.WithTimeout(ctx, alertReadTimeout)
		defer cancel()
		rows, err := s.pool.Query(rctx, all, args...)
		var out []T
		if err == nil {
			out, err = pgx.CollectRows(rows, scan)
		}
		if err == nil {
			s.sawTenantsOf(len(out), func(i int) uuid.UUID { return tenantOf(out[i]) })
			return out, nil
		}
		if !s.perWorkerAlerts(ctx, err) {
			return nil, translate(err)
		}
		full = translate(err)
	}
	rctx, cancel := context.WithTimeout(ctx, alertReadTimeout)
	defer cancel()
	answers, unanswered, err := readWorkersOf(rctx, s, s.alertWorkTenants(),
		func(wctx context.Context, tenants []uuid.UUID) ([]T, error) {
			rows, err := s.pool.Query(wctx, of, append(slices.Clip(args), tenants)...)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, scan)
		})
	return partialRead(answers, unanswered, err, full)
}

// partialRead joins the answers of a read per worker: an error when no
// worker answered and some were asked (the read of every shard's, full,
// with the first worker's), a *store.PartialReadError beside the answers
// when some did not.
func partialRead[T any](answers [][]T, unanswered []uuid.UUID, firstErr, full error) ([]T, error) {
	if len(answers) == 0 && len(unanswered) > 0 {
		return nil, errors.Join(full, firstErr)
	}
	var out []T
	for _, rows := range answers {
		out = append(out, rows...)
	}
	if len(unanswered) > 0 {
		return out, &store.PartialReadError{Unanswered: unanswered, Err: firstErr}
	}
	return out, nil
}

// sortedTenants sorts tenants and drops the repeated ones.
func sortedTenants(tenants []uuid.UUID) []uuid.UUID {
	slices.SortFunc(tenants, func(x, y uuid.UUID) int { return bytes.Compare(x[:], y[:]) })
	return slices.Compact(tenants)
}
