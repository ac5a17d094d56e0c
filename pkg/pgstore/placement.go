package pgstore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// tenantParallelism bounds the tenants (or workers) served at once on Citus
// (each call holds a connection of the pool).
const tenantParallelism = 4

// eachTenant calls do(i) for every i below n, tenantParallelism at a time,
// and returns when every call has: the shape of every per-tenant or
// per-worker fan-out on Citus (heartbeat batches, held heartbeats, feed
// reads, the sweep).
func eachTenant(n int, do func(i int)) {
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, tenantParallelism)
	)
	for i := range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			do(i)
		})
	}
	wg.Wait()
}

// placementTTL is how long the worker of a tenant, as read from Citus's
// metadata, is used to group heartbeats before it is read again. A shard
// moved meanwhile only makes a group's call reach two workers, which Citus
// still runs correctly, if slower; a call that fails reads its tenants'
// workers again.
const placementTTL = time.Minute

// tenantPlacement is the worker (Citus's node group) that holds a tenant's
// shards, and when it was read.
type tenantPlacement struct {
	group  int64
	readAt time.Time
}

// tenantWorkersSQL returns the worker (node group) of each tenant $1: the
// node of the shard of its mcp_servers rows (the tenant tables are
// colocated), the lowest when a shard has several, from the coordinator's
// metadata alone.
const tenantWorkersSQL = `SELECT t, min(p.groupid)::bigint FROM unnest($1::uuid[]) AS t
	JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('mcp_servers', t)
	GROUP BY t`

// workerGroups splits pairs by the worker of their tenant: groups in the
// order of their first pair, each sorted by tenant, then server. A group's
// call locks its rows shard by shard, in the order of the shards' tasks,
// which is the same for every call of a worker; within a shard, in its
// plan's order. Two calls that lock the same rows in other orders deadlock
// only within a shard, which a retry of the batch resolves (isRetryable).
func (s *Store) workerGroups(ctx context.Context, pairs []batchKey) ([][]batchKey, error) {
	groups, _, err := s.workerGroupsOf(ctx, pairs)
	return groups, err
}

// workerGroupsOf is workerGroups with the worker of each group (-1: not
// known).
func (s *Store) workerGroupsOf(ctx context.Context, pairs []batchKey) ([][]batchKey, []int64, error) {
	worker, err := s.tenantWorkers(ctx, pairs)
	if err != nil {
		return nil, nil, err
	}
	groups := groupPairs(pairs, func(p batchKey) int64 { return worker[p.tenant] })
	workers := make([]int64, len(groups))
	for i, g := range groups {
		workers[i] = worker[g[0].tenant]
	}
	for _, g := range groups {
		slices.SortFunc(g, func(a, b batchKey) int {
			if c := bytes.Compare(a.tenant[:], b.tenant[:]); c != 0 {
				return c
			}
			return bytes.Compare(a.serverID[:], b.serverID[:])
		})
	}
	return groups, workers, nil
}

// callWorkers calls call(g) for each group of workerGroups, the workers'
// calls side by side (tenantParallelism at a time): the shape of every
// per-worker call on Citus (heartbeat batches, held heartbeats, the
// sweep's marks). It returns each call's error. A call that failed for a
// workerFault, while ctx lasts, makes the group's tenants' workers be read
// again.
func (s *Store) callWorkers(ctx context.Context, groups [][]batchKey, call func(g int) error) []error {
	errs := make([]error, len(groups))
	eachTenant(len(groups), func(g int) {
		errs[g] = call(g)
		if errs[g] != nil && workerFault(errs[g]) && ctx.Err() == nil {
			s.forgetWorkers(groups[g])
		}
	})
	return errs
}

// Sweep calls that may wait for one Citus worker (a tenant's sweep, a
// worker's marks, a read of every shard) get at most a quarter of the
// sweep's time left, when that is minWorkerShare or more (a shorter sweep
// leaves its calls its whole time): a worker that hangs (a frozen host, a
// partition that drops packets) instead of refusing connections then
// fails its own tenants' calls, and the rest of the time goes to the other
// workers' tenants. A call cut so also costs the driver's wait for the
// cancelled statement (a second): the hung worker never answers the
// coordinator's cancel. Only the sweep, where a call cut short means a
// tenant not swept (as in an outage), never a transition: a held flush cut
// short would leave heartbeats unwritten that the sweep then misses.
const (
	workerShareOf  = 4
	minWorkerShare = 500 * time.Millisecond
)

// workerShare bounds ctx for one sweep call that may wait for one worker.
func workerShare(ctx context.Context) (context.Context, context.CancelFunc) {
	if share, own, _ := workerShareTime(ctx); own {
		return context.WithTimeout(ctx, share)
	}
	return context.WithCancel(ctx)
}

// workerShareTime is the time a call on ctx gets (workerShare): its own
// share of what is left (own), or all of what is left when that share
// would be shorter than minWorkerShare; bounded is false when ctx has no
// deadline.
func workerShareTime(ctx context.Context) (share time.Duration, own, bounded bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, false, false
	}
	left := time.Until(deadline)
	if share := left / workerShareOf; share >= minWorkerShare {
		return share, true, true
	}
	return left, false, left > 0
}

// hungWorker reports whether a statement on wctx (of workerShare of ctx)
// failed with err because its share ran out while ctx lasts and the
// coordinator did not answer its cancel (no server error came back, the
// driver gave up on the connection): the coordinator waits for a worker
// that hangs, and another call of that worker would wait as long. A
// statement that was merely slow, or waited for a lock, is cancelled and
// says so (57014).
func hungWorker(wctx, ctx context.Context, err error) bool {
	var pgErr *pgconn.PgError
	return err != nil && wctx.Err() != nil && ctx.Err() == nil && !errors.As(err, &pgErr)
}

// onWorkerConn runs fn on a connection of the pool acquired on ctx (when
// write, acquireForCall's), giving fn its workerShare of ctx for its
// statements: the share bounds what the worker is asked, not the wait for
// a connection, which the calls of another worker that hangs may hold up.
// hung reports a hungWorker.
func (s *Store) onWorkerConn(ctx context.Context, write bool, fn func(sctx context.Context, c *pgxpool.Conn) error) (hung bool, err error) {
	acquire := s.pool.Acquire
	if write {
		acquire = s.acquireForCall
	}
	c, err := acquire(ctx)
	if err != nil {
		return false, err
	}
	defer c.Release()
	sctx, cancel := workerShare(ctx)
	defer cancel()
	err = fn(sctx, c)
	return hungWorker(sctx, ctx, err), err
}

// sweepWorkers are the workers of one sweep's tenants, as the
// coordinator's metadata names them (of: nil when it could not be read),
// and those that did not answer during the sweep (its probe, or a call
// whose share ran out), with the error: their tenants are not called
// (again) in that sweep. A tenant whose worker is not known is called.
type sweepWorkers struct {
	of     map[uuid.UUID]int64
	mu     sync.Mutex
	failed map[int64]error
}

// worker returns tenant's worker, and whether it is known.
func (w *sweepWorkers) worker(tenant uuid.UUID) (int64, bool) {
	g, ok := w.of[tenant]
	return g, ok && g >= 0
}

// answered reports whether tenant's worker is known and has not failed
// to answer in this sweep.
func (w *sweepWorkers) answered(tenant uuid.UUID) bool {
	_, known := w.worker(tenant)
	return known && w.failure(tenant) == nil
}

// fail records that tenant's worker did not answer, with err.
func (w *sweepWorkers) fail(tenant uuid.UUID, err error) {
	g, ok := w.worker(tenant)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = make(map[int64]error)
	}
	if _, seen := w.failed[g]; !seen {
		w.failed[g] = err
	}
}

// failure returns the error of tenant's worker that did not answer, or nil.
func (w *sweepWorkers) failure(tenant uuid.UUID) error {
	g, ok := w.worker(tenant)
	if !ok {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed[g]
}

// workerFault reports whether a per-worker call's error may mean that the
// worker is down or the tenants' shards are elsewhere now: anything but a
// wait for a row lock (a lock timeout, a deadlock, a serialization
// failure) and a read-only coordinator's refusal, which say nothing about
// where the shards are.
func workerFault(err error) bool {
	var pgErr *pgconn.PgError
	lockWait := isRetryable(err) || (errors.As(err, &pgErr) && pgErr.Code == pgerrcode.LockNotAvailable)
	return !lockWait && !errors.Is(err, ErrReadOnly)
}

// groupPairs splits pairs by key: groups in the order of their first pair,
// each in pairs' order.
func groupPairs[K comparable](pairs []batchKey, key func(batchKey) K) [][]batchKey {
	index := make(map[K]int)
	var groups [][]batchKey
	for _, p := range pairs {
		k := key(p)
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], p)
	}
	return groups
}

// tenantWorkers returns the worker of every tenant of pairs, reading from
// Citus those not known or known for longer than placementTTL.
func (s *Store) tenantWorkers(ctx context.Context, pairs []batchKey) (map[uuid.UUID]int64, error) {
	now := time.Now()
	if s.clock != nil {
		now = s.clock.Now()
	}
	out := make(map[uuid.UUID]int64)
	var ask [][16]byte
	s.placementMu.Lock()
	for _, p := range pairs {
		if _, ok := out[p.tenant]; ok {
			continue
		}
		if pl, ok := s.placements[p.tenant]; ok && now.Sub(pl.readAt) < placementTTL {
			out[p.tenant] = pl.group
			continue
		}
		out[p.tenant] = -1
		ask = append(ask, p.tenant)
	}
	s.placementMu.Unlock()
	if len(ask) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, tenantWorkersSQL, ask)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	read := make(map[uuid.UUID]int64, len(ask))
	for rows.Next() {
		var (
			tenant uuid.UUID
			group  int64
		)
		if err := rows.Scan(&tenant, &group); err != nil {
			return nil, err
		}
		read[tenant] = group
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.placementMu.Lock()
	defer s.placementMu.Unlock()
	if s.placements == nil {
		s.placements = make(map[uuid.UUID]tenantPlacement)
	}
	for tenant, group := range read {
		s.placements[tenant] = tenantPlacement{group: group, readAt: now}
		out[tenant] = group
	}
	return out, nil
}

// forgetWorkers drops the workers of the tenants of pairs, whose call
// failed: a shard that moved is found again by the next batch.
func (s *Store) forgetWorkers(pairs []batchKey) {
	s.placementMu.Lock()
	defer s.placementMu.Unlock()
	for _, p := range pairs {
		delete(s.placements, p.tenant)
	}
}
