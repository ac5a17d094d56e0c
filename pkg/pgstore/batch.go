package pgstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Group commit on the heartbeat path: concurrent heartbeats are gathered
// into batches and each batch, whatever its tenants, is applied by one call
// of mcp_heartbeat_healthy (migration 0007) for the servers that are healthy
// and stay so, and, only when some are not, one call of mcp_heartbeat for
// the rest (recoveries, deregistered and unknown servers): one statement and
// one commit per batch in the common case. A caller is answered only after
// the statement that applied its heartbeat has committed; a failed batch
// answers each of its callers with the error. Under light load a batch is a
// single heartbeat, sent at once.
//
// One batch is applied at a time: a flusher with heartbeats waits for the
// batch being applied to finish (its turn) and then takes whatever queued
// meanwhile, so that batches grow with the load instead of splitting it
// into more, smaller commits, each of which costs PostgreSQL its own
// statement and commit (docs/performance.md, "The tail"). A flusher that
// waited the overlap (DefaultBatchOverlap) applies its batch beside the
// slow one, so that a batch held up by a locked row or a slow disk holds up
// the heartbeats of at most one batch, as before, up to the flushers' count.
// On Citus a batch is a call per worker, each answering its own
// heartbeats, and a worker that stalls holds up only its own tenants'
// (stall.go); and the heartbeats of a worker that mcpd reaches directly
// go in batches of their own (batcherFor), so that one worker's next
// batch does not wait for another worker's call.

// heartbeatHealthySQL records the heartbeats of the (tenant, server) pairs
// $1, $2 at $3 (NULL: now()) whose server is healthy under that tenant, and
// returns those servers.
const heartbeatHealthySQL = `SELECT * FROM mcp_heartbeat_healthy($1::uuid[], $2::uuid[], $3::timestamptz)`

// heartbeatBatchSQL applies the heartbeats of the (tenant, server) pairs $1,
// $2 at $3 (NULL: now()), whatever their servers' status: one row per pair
// whose server exists under that tenant, with its previous status, the
// server after the heartbeat and the recovery event, if any.
const heartbeatBatchSQL = `SELECT * FROM mcp_heartbeat($1::uuid[], $2::uuid[], $3::timestamptz)`

// Batching limits.
const (
	// DefaultMaxBatch bounds the heartbeats one batch applies.
	DefaultMaxBatch = 512
	// DefaultFlushers is how many batches may be in flight at once.
	DefaultFlushers = 4
	// DefaultBatchOverlap is how long a batch waits for the one being
	// applied before it is applied beside it.
	DefaultBatchOverlap = 20 * time.Millisecond
)

type heartbeatResult struct {
	srv registry.Server
	ev  *registry.Event
	err error
}

type heartbeatRequest struct {
	tenant, serverID uuid.UUID
	done             chan heartbeatResult // buffered, 1
	// span, when traced, is told the size of the batch that applied it.
	span trace.Span
}

// batcherFor returns the batcher of tenant's heartbeats: on Citus, once
// the store knows tenant's worker (TenantNode) and has a pool to it
// (workerPool: the store reaches the workers directly), that worker's
// own, so that one worker's batch never waits for another worker's call
// to end before its turn (each worker's heartbeats still go in batches
// that grow with its load); else the store's, whose batches are a call
// per worker (applyPerWorker) and which learns the tenants' workers. The
// calls go through the coordinator's pool either way: a worker's batcher
// has half the store's flushers, so that W workers' batchers hold at
// most 2W of its connections, where the store's batcher alone held up to
// four per worker.
func (s *Store) batcherFor(ctx context.Context, tenant uuid.UUID) *batcher {
	worker := s.TenantNode(ctx, tenant)
	if worker <= 0 || s.workerPool(worker) == nil {
		return s.batcher
	}
	s.workerBatchersMu.Lock()
	defer s.workerBatchersMu.Unlock()
	if s.batchersClosed {
		return s.batcher // closed: its submit answers ErrUnavailable
	}
	b := s.workerBatchers[worker]
	if b == nil {
		if s.workerBatchers == nil {
			s.workerBatchers = make(map[int64]*batcher)
		}
		// Half the flushers (one at least): a worker's batches overlap
		// only when one is slow; with the store's count each, small
		// batches applied beside each other at saturation cost Citus a
		// third more CPU per heartbeat (BenchmarkHeartbeatCallers,
		// docs/performance.md).
		o := s.batcherOpts
		b = newBatcher(s, max(cmp.Or(o.Flushers, DefaultFlushers)/2, 1), o.MaxBatch, o.BatchWait, o.BatchOverlap)
		s.workerBatchers[worker] = b
	}
	return b
}

// batcher gathers heartbeats and applies them in batches.
type batcher struct {
	store    *Store
	queue    chan *heartbeatRequest
	maxBatch int
	wait     time.Duration
	// turn holds a token while a batch that took its turn is applied;
	// overlap is how long a flusher waits for it (negative: no turns).
	turn    chan struct{}
	overlap time.Duration
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	// closing is held to queue a heartbeat and taken whole by close, so
	// that no heartbeat is queued once the flushers may have drained.
	closing sync.RWMutex
	closed  bool
}

func newBatcher(s *Store, flushers, maxBatch int, wait, overlap time.Duration) *batcher {
	if flushers <= 0 {
		flushers = DefaultFlushers
	}
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	if overlap == 0 {
		overlap = DefaultBatchOverlap
	}
	b := &batcher{store: s, queue: make(chan *heartbeatRequest, maxBatch*flushers), maxBatch: maxBatch,
		wait: wait, turn: make(chan struct{}, 1), overlap: overlap, stop: make(chan struct{})}
	b.wg.Add(flushers)
	for range flushers {
		go b.flushLoop()
	}
	return b
}

func (b *batcher) close() {
	b.once.Do(func() {
		b.closing.Lock()
		b.closed = true
		b.closing.Unlock()
		close(b.stop)
		b.wg.Wait()
	})
}

// submit queues one heartbeat and waits for its batch to commit; span,
// when not nil, is the heartbeat's span.
func (b *batcher) submit(ctx context.Context, tenant, serverID uuid.UUID, span trace.Span) (registry.Server, *registry.Event, error) {
	req := &heartbeatRequest{tenant: tenant, serverID: serverID, done: make(chan heartbeatResult, 1), span: span}
	if err := b.enqueue(ctx, req); err != nil {
		return registry.Server{}, nil, err
	}
	select {
	case res := <-req.done:
		return res.srv, res.ev, res.err
	case <-ctx.Done():
		// The batch may still commit; the heartbeat is then applied but
		// not acknowledged, which a retry makes harmless.
		return registry.Server{}, nil, translate(ctx.Err())
	}
}

// enqueue queues req for a flusher, unless b is closed: a heartbeat
// queued once the flushers drained would wait for its context alone.
func (b *batcher) enqueue(ctx context.Context, req *heartbeatRequest) error {
	b.closing.RLock()
	defer b.closing.RUnlock()
	if b.closed {
		return registry.ErrUnavailable
	}
	select {
	case b.queue <- req:
		return nil
	case <-ctx.Done():
		return translate(ctx.Err())
	}
}

func (b *batcher) flushLoop() {
	defer b.wg.Done()
	batch := make([]*heartbeatRequest, 0, b.maxBatch)
	for {
		select {
		case <-b.stop:
			b.drain()
			return
		case req := <-b.queue:
			batch = append(batch[:0], req)
		}
		turn := b.takeTurn()
		if b.wait > 0 {
			timer := time.NewTimer(b.wait)
		gather:
			for len(batch) < b.maxBatch {
				select {
				case req := <-b.queue:
					batch = append(batch, req)
				case <-timer.C:
					break gather
				}
			}
			timer.Stop()
		}
	more:
		for len(batch) < b.maxBatch {
			select {
			case req := <-b.queue:
				batch = append(batch, req)
			default:
				break more
			}
		}
		b.store.applyBatch(batch)
		if turn {
			<-b.turn
		}
	}
}

// takeTurn waits until no batch that took its turn is being applied, or
// for the overlap, and reports whether it took the turn.
func (b *batcher) takeTurn() bool {
	if b.overlap < 0 {
		return false
	}
	select {
	case b.turn <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(b.overlap)
	defer t.Stop()
	select {
	case b.turn <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-b.stop:
		return false
	}
}

// drain answers whatever is still queued after stop.
func (b *batcher) drain() {
	for {
		select {
		case req := <-b.queue:
			req.done <- heartbeatResult{err: registry.ErrUnavailable}
		default:
			return
		}
	}
}

// applyBatch applies reqs and answers each: with its result once the
// statement that applied it has committed, or with the error of the
// statement that failed it.
func (s *Store) applyBatch(reqs []*heartbeatRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), s.batchTimeout)
	pairs := make([]batchKey, len(reqs))
	for i, r := range reqs {
		pairs[i] = batchKey{r.tenant, r.serverID}
	}
	// In server_id order, the order in which the statements lock the rows,
	// so that concurrent batches do not deadlock; each pair once.
	slices.SortFunc(pairs, func(a, b batchKey) int {
		if c := bytes.Compare(a.serverID[:], b.serverID[:]); c != 0 {
			return c
		}
		return bytes.Compare(a.tenant[:], b.tenant[:])
	})
	pairs = slices.Compact(pairs)
	defer cancel()
	citus, err := s.onCitus(ctx)
	if err != nil {
		answerBatch(reqs, len(pairs), nil, err)
		return
	}
	if citus {
		s.applyPerWorker(ctx, reqs, pairs)
		return
	}
	results := make(map[batchKey]heartbeatResult, len(pairs))
	for attempt := 0; attempt < 2; attempt++ {
		if err = s.execBatch(ctx, pairs, results); !isRetryable(err) {
			break
		}
	}
	answerBatch(reqs, len(pairs), results, err)
}

// applyPerWorker applies a batch on Citus: the pairs of each worker
// (workerGroups) as a call to that worker (workerCalls), the workers'
// calls side by side, each answering its own requests when it returns (a
// deadlock or serialization failure is tried again once). It returns when
// every call has, or after the stall time (awaitWorkers): a worker that
// hangs then holds up only its own tenants' heartbeats, and the flusher
// goes on to the next batch.
func (s *Store) applyPerWorker(ctx context.Context, reqs []*heartbeatRequest, pairs []batchKey) {
	groups, workers, err := s.workerGroupsOf(ctx, pairs)
	if err != nil {
		answerBatch(reqs, len(pairs), nil, err)
		return
	}
	own := make(map[batchKey][]*heartbeatRequest, len(reqs))
	for _, r := range reqs {
		k := batchKey{r.tenant, r.serverID}
		own[k] = append(own[k], r)
	}
	now := s.now()
	awaitWorkers(ctx, s.workerCalls.stall, len(groups), func(wctx context.Context, g int) struct{} {
		group := groups[g]
		var greqs []*heartbeatRequest
		for _, p := range group {
			greqs = append(greqs, own[p]...)
		}
		results := make(map[batchKey]heartbeatResult, len(group))
		err := s.workerCalls.onWorker(wctx, workers[g], group[0].tenant, func(cctx context.Context) error {
			var err error
			for attempt := 0; attempt < 2; attempt++ {
				if err = s.heartbeatOnWorker(cctx, pending(group, results), now, results); !isRetryable(err) {
					break
				}
			}
			return err
		})
		// A call ended because its worker was found hung (the only cancel
		// of the call's own context) leaves context.Canceled in the pairs
		// it failed, also when it returned nil (heartbeatRest answers each
		// tenant's failure in results): those answer ErrWorkerStalled.
		stalled := errors.Is(err, ErrWorkerStalled)
		for p, res := range results {
			if res.err != nil && (stalled || wctx.Err() == nil && errors.Is(res.err, context.Canceled)) {
				results[p] = heartbeatResult{err: ErrWorkerStalled}
			}
		}
		if !stalled && err != nil && workerFault(err) && wctx.Err() == nil {
			s.forgetWorkers(group)
		}
		answerBatch(greqs, len(pairs), results, err)
		return struct{}{}
	})
}

// answerBatch answers each of reqs, of a batch of size pairs: with its
// result in results, or err, or ErrNotFound (its server is not its
// tenant's).
func answerBatch(reqs []*heartbeatRequest, size int, results map[batchKey]heartbeatResult, err error) {
	for _, req := range reqs {
		key := batchKey{req.tenant, req.serverID}
		res, ok := results[key]
		switch {
		case ok:
		case err != nil:
			res = heartbeatResult{err: translate(err)}
		default:
			res = heartbeatResult{err: registry.ErrNotFound}
		}
		if req.span != nil {
			req.span.SetAttributes(attribute.Int("db.operation.batch.size", size))
		}
		req.done <- res
		if res.ev != nil {
			// Of a server heartbeating twice in one batch, one caller
			// reports the recovery.
			res.ev = nil
			results[key] = res
		}
	}
}

// batchKey identifies a heartbeat's answer: mcp_heartbeat matches a server
// on its tenant and its id, so a server id under another tenant is not found.
type batchKey struct{ tenant, serverID uuid.UUID }

// execBatch applies the heartbeats of the pairs that results does not hold
// yet on plain PostgreSQL and adds the results of each statement that
// committed (on Citus: applyPerWorker).
func (s *Store) execBatch(ctx context.Context, pairs []batchKey, results map[batchKey]heartbeatResult) error {
	todo := pending(pairs, results)
	if len(todo) == 0 {
		return nil
	}
	now := s.now()
	if err := s.heartbeatHealthy(ctx, todo, now, results); err != nil {
		return err
	}
	rest := pending(todo, results)
	if len(rest) == 0 {
		return nil
	}
	return s.heartbeatAny(ctx, rest, now, results)
}

// pending returns the pairs that results does not hold, in their order.
func pending(pairs []batchKey, results map[batchKey]heartbeatResult) []batchKey {
	if len(results) == 0 {
		return pairs
	}
	var out []batchKey
	for _, p := range pairs {
		if _, done := results[p]; !done {
			out = append(out, p)
		}
	}
	return out
}

// pairArrays returns the tenants and servers of pairs as [16]byte, which pgx
// encodes as it is; uuid.UUID goes through its text form (driver.Valuer), a
// tenth of mcpd's CPU per heartbeat.
func pairArrays(pairs []batchKey) (tenants, servers [][16]byte) {
	tenants = make([][16]byte, len(pairs))
	servers = make([][16]byte, len(pairs))
	for i, p := range pairs {
		tenants[i], servers[i] = p.tenant, p.serverID
	}
	return tenants, servers
}

// heartbeatHealthy applies the heartbeats of the pairs whose server is
// healthy, in one statement, and adds their results.
func (s *Store) heartbeatHealthy(ctx context.Context, pairs []batchKey, now *time.Time, results map[batchKey]heartbeatResult) error {
	tenants, servers := pairArrays(pairs)
	rows, err := s.pool.Query(ctx, heartbeatHealthySQL, tenants, servers, now)
	if err != nil {
		return err
	}
	defer rows.Close()
	var done []registry.Server
	for rows.Next() {
		srv, err := scanServer(rows)
		if err != nil {
			return err
		}
		done = append(done, srv)
	}
	// The statement ran in its own implicit transaction: no error once its
	// rows are read means it has committed.
	if err := rows.Err(); err != nil {
		return err
	}
	for _, srv := range done {
		results[batchKey{srv.TenantID, srv.ServerID}] = heartbeatResult{srv: srv}
	}
	return nil
}

// heartbeatAny applies the heartbeats of the pairs whatever their servers'
// status, in one statement, and adds their results; a pair without a row is
// a server not found under that tenant.
func (s *Store) heartbeatAny(ctx context.Context, pairs []batchKey, now *time.Time, results map[batchKey]heartbeatResult) error {
	tenants, servers := pairArrays(pairs)
	rows, err := s.pool.Query(ctx, heartbeatBatchSQL, tenants, servers, now)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		tenant uuid.UUID
		r      heartbeatRow
	)
	dest := append([]any{&tenant}, r.dest()...)
	done := make(map[batchKey]heartbeatResult, len(pairs))
	for rows.Next() {
		r = heartbeatRow{}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		done[batchKey{tenant, r.prevID}] = r.result()
	}
	if err := rows.Err(); err != nil {
		return err
	}
	maps.Copy(results, done)
	return nil
}

// heartbeatTenantSQL applies the heartbeats of tenant $1's servers $2 at $3
// (NULL: now()), one statement per tenant, which Citus routes to the
// tenant's shard: as heartbeatBatchSQL otherwise (migration 0019).
const heartbeatTenantSQL = `SELECT * FROM mcp_heartbeat_tenant($1::uuid, $2::uuid[], $3::timestamptz)`

// heartbeatHealthyGroupSQL records the heartbeats of the (tenant, server)
// pairs $2, $3 whose server is healthy, at $4 (NULL: now()), the tenants
// all on tenant $1's worker: one call that Citus hands to that worker, the
// common case (mcp_heartbeat_healthy_group).
const heartbeatHealthyGroupSQL = `SELECT * FROM mcp_heartbeat_healthy_group($1::uuid, $2::uuid[], $3::uuid[], $4::timestamptz)`

// heartbeatOnWorker applies the heartbeats of pairs on Citus, whose
// tenants share a worker: the healthy servers' in one call and one commit
// (mcp_heartbeat_healthy_group, which Citus hands to that worker), the
// rest (recoveries, deregistered and unknown servers) tenant by tenant
// (heartbeatRest). As long as the worker read for the tenants holds
// (placementTTL), no statement or transaction reaches two workers. It
// answers each pair in results, but leaves unanswered the pairs of a call
// that failed with a deadlock or a serialization failure, which a retry
// may resolve; it returns the error of the first call when it failed, else
// that of a call to retry.
func (s *Store) heartbeatOnWorker(ctx context.Context, pairs []batchKey, now *time.Time, results map[batchKey]heartbeatResult) error {
	if len(pairs) == 0 {
		return nil
	}
	healthy, err := s.heartbeatHealthyGroup(ctx, pairs, now)
	if err != nil {
		_ = answerFailed(pairs, err, results)
		return err
	}
	return s.heartbeatRest(ctx, pairs, healthy, now, results)
}

// heartbeatRest answers the heartbeats of pairs, whose tenants share a
// worker, after that worker's call wrote the healthy servers': those in
// results, and the rest tenant by tenant through mcp_heartbeat_tenant. It
// answers each pair in results: its result, ErrNotFound when the server
// is not its tenant's, or the error of the call that failed it; but it
// leaves unanswered the pairs of a call that failed with a deadlock or a
// serialization failure, and returns that error, for the batch's retry.
func (s *Store) heartbeatRest(ctx context.Context, pairs []batchKey, healthy map[batchKey]registry.Server, now *time.Time, results map[batchKey]heartbeatResult) error {
	var rest []batchKey
	for _, p := range pairs {
		if srv, ok := healthy[p]; ok {
			results[p] = heartbeatResult{srv: srv}
		} else {
			rest = append(rest, p)
		}
	}
	// Each tenant's call on its own: one that fails fails its tenant only.
	var retry error
	for _, own := range groupPairs(rest, func(p batchKey) uuid.UUID { return p.tenant }) {
		tenant, servers := own[0].tenant, make([][16]byte, len(own))
		for i, p := range own {
			servers[i] = p.serverID
		}
		done := make(map[batchKey]heartbeatResult, len(servers))
		if err := s.heartbeatTenantAny(ctx, tenant, servers, now, done); err != nil {
			retry = cmp.Or(retry, answerFailed(own, err, results))
			continue
		}
		for _, p := range own {
			res, ok := done[p]
			if !ok {
				res = heartbeatResult{err: registry.ErrNotFound}
			}
			results[p] = res
		}
	}
	return retry
}

// heartbeatHealthyGroup records the heartbeats of pairs, whose tenants
// share a worker, for the servers that are healthy, in one call, and
// returns those servers.
func (s *Store) heartbeatHealthyGroup(ctx context.Context, pairs []batchKey, now *time.Time) (map[batchKey]registry.Server, error) {
	tenants, servers := pairArrays(pairs)
	rows, err := s.writeQuery(ctx, heartbeatHealthyGroupSQL, tenants[0], tenants, servers, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	healthy := make(map[batchKey]registry.Server, len(pairs))
	for rows.Next() {
		srv, err := scanServer(rows)
		if err != nil {
			return nil, err
		}
		healthy[batchKey{srv.TenantID, srv.ServerID}] = srv
	}
	// Committed once its rows are read without error: the statement ran in
	// its own implicit transaction.
	return healthy, rows.Err()
}

// answerFailed answers pairs with err, the error of the call that failed
// them, unless a retry of the batch may resolve it (isRetryable): then it
// leaves them unanswered and returns err.
func answerFailed(pairs []batchKey, err error, results map[batchKey]heartbeatResult) error {
	if isRetryable(err) {
		return err
	}
	for _, p := range pairs {
		results[p] = heartbeatResult{err: translate(err)}
	}
	return nil
}

// heartbeatTenantAny applies one tenant's heartbeats whatever their
// servers' status, through mcp_heartbeat_tenant.
func (s *Store) heartbeatTenantAny(ctx context.Context, tenant uuid.UUID, servers [][16]byte, now *time.Time, results map[batchKey]heartbeatResult) error {
	rows, err := s.writeQuery(ctx, heartbeatTenantSQL, [16]byte(tenant), servers, now)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		t uuid.UUID
		r heartbeatRow
	)
	dest := append([]any{&t}, r.dest()...)
	done := make(map[batchKey]heartbeatResult, len(servers))
	for rows.Next() {
		r = heartbeatRow{}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		done[batchKey{t, r.prevID}] = r.result()
	}
	if err := rows.Err(); err != nil {
		return err
	}
	maps.Copy(results, done)
	return nil
}

func (r *heartbeatRow) result() heartbeatResult {
	if r.prevStatus == string(registry.StatusDeregistered) {
		return heartbeatResult{err: registry.ErrDeregistered}
	}
	srv, err := r.server()
	if err != nil {
		return heartbeatResult{err: err}
	}
	ev, err := r.event()
	return heartbeatResult{srv: srv, ev: ev, err: err}
}

// isRetryable reports a deadlock or serialization failure, which a retry of
// the whole batch resolves.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.DeadlockDetected || pgErr.Code == pgerrcode.SerializationFailure)
}
