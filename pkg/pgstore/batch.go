package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// Group commit on the heartbeat path: concurrent heartbeats are gathered
// into batches and each batch is applied by one set-based statement per
// tenant, all pipelined in one implicit transaction: one round trip and one
// commit for the whole batch. A caller is answered only after its batch has
// committed; a failed batch answers each of its callers with the error.
// Under light load a batch is a single heartbeat, sent at once.

// lockServersSQL locks the servers of a batch in server_id order, so that
// concurrent batches cannot deadlock.
const lockServersSQL = `SELECT 1 FROM mcp_servers WHERE server_id = ANY($1::uuid[]) ORDER BY server_id FOR UPDATE`

// heartbeatBatchSQL records heartbeats for the servers $1 of the current
// tenant at $2 (NULL: now()), recovers the degraded and unhealthy ones, gives
// back the skills the cascade took, and audits each recovery. Rows are
// locked in server_id order, so concurrent batches cannot deadlock. One row
// per requested server that exists.
var heartbeatBatchSQL = `
WITH prev AS (
    SELECT s.server_id, s.status FROM mcp_servers s
    WHERE s.server_id = ANY($1::uuid[])
    ORDER BY s.server_id
    FOR UPDATE
), upd AS (
    UPDATE mcp_servers s
    SET last_heartbeat_at = COALESCE($2::timestamptz, now()), status = 'healthy'
    FROM prev p
    WHERE s.server_id = p.server_id AND p.status <> 'deregistered'
    RETURNING ` + prefixed("s") + `, p.status AS from_status
), restored AS (
    UPDATE mcp_skills k
    SET available = true, unavailable_reason = NULL
    FROM upd u
    WHERE k.server_id = u.server_id AND u.from_status = 'unhealthy' AND k.unavailable_reason = 'server_unhealthy'
    RETURNING k.server_id, k.name
), ev AS (
    INSERT INTO mcp_audit_events
        (event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at, body)
    SELECT gen_random_uuid(), u.tenant_id, 'mcp.server.recovered', u.server_id, u.module_name, u.from_status,
           u.status, u.trace_id, u.last_heartbeat_at,
           jsonb_build_object('server_id', u.server_id, 'module_name', u.module_name, 'status', u.status,
                              'version', u.version, 'supported_protocols', to_jsonb(u.supported_protocols),
                              'skills_affected', COALESCE((SELECT jsonb_agg(r.name ORDER BY r.name)
                                                           FROM restored r WHERE r.server_id = u.server_id), '[]'::jsonb))
    FROM upd u
    WHERE u.from_status IN ('degraded', 'unhealthy')
    RETURNING ` + eventColumns + `
)
SELECT p.server_id, p.status, ` + prefixed("u") + `, e.seq, e.event_id, e.tenant_id, e.kind, e.server_id,
       e.module_name, e.from_status, e.to_status, e.trace_id, e.occurred_at, e.body
FROM prev p
LEFT JOIN upd u ON u.server_id = p.server_id
LEFT JOIN ev e ON e.server_id = p.server_id`

// Batching limits.
const (
	// DefaultMaxBatch bounds the heartbeats one batch applies.
	DefaultMaxBatch = 512
	// DefaultFlushers is how many batches may be in flight at once.
	DefaultFlushers = 4
)

type heartbeatResult struct {
	srv heartbeat.Server
	ev  *heartbeat.Event
	err error
}

type heartbeatRequest struct {
	tenant, serverID uuid.UUID
	done             chan heartbeatResult // buffered, 1
}

// batcher gathers heartbeats and applies them in batches.
type batcher struct {
	store    *Store
	queue    chan *heartbeatRequest
	maxBatch int
	wait     time.Duration
	stop     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

func newBatcher(s *Store, flushers, maxBatch int, wait time.Duration) *batcher {
	if flushers <= 0 {
		flushers = DefaultFlushers
	}
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	b := &batcher{store: s, queue: make(chan *heartbeatRequest, maxBatch*flushers), maxBatch: maxBatch,
		wait: wait, stop: make(chan struct{})}
	b.wg.Add(flushers)
	for range flushers {
		go b.flushLoop()
	}
	return b
}

func (b *batcher) close() {
	b.once.Do(func() {
		close(b.stop)
		b.wg.Wait()
	})
}

// submit queues one heartbeat and waits for its batch to commit.
func (b *batcher) submit(ctx context.Context, tenant, serverID uuid.UUID) (heartbeat.Server, *heartbeat.Event, error) {
	req := &heartbeatRequest{tenant: tenant, serverID: serverID, done: make(chan heartbeatResult, 1)}
	select {
	case b.queue <- req:
	case <-ctx.Done():
		return heartbeat.Server{}, nil, translate(ctx.Err())
	case <-b.stop:
		return heartbeat.Server{}, nil, heartbeat.ErrUnavailable
	}
	select {
	case res := <-req.done:
		return res.srv, res.ev, res.err
	case <-ctx.Done():
		// The batch may still commit; the heartbeat is then applied but
		// not acknowledged, which a retry makes harmless.
		return heartbeat.Server{}, nil, translate(ctx.Err())
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
	}
}

// drain answers whatever is still queued after stop.
func (b *batcher) drain() {
	for {
		select {
		case req := <-b.queue:
			req.done <- heartbeatResult{err: heartbeat.ErrUnavailable}
		default:
			return
		}
	}
}

// applyBatch applies reqs in one pipelined transaction and answers each.
func (s *Store) applyBatch(reqs []*heartbeatRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), s.batchTimeout)
	defer cancel()
	var (
		results map[batchKey]heartbeatResult
		err     error
	)
	for attempt := 0; attempt < 2; attempt++ {
		results, err = s.execBatch(ctx, reqs)
		if !isRetryable(err) {
			break
		}
	}
	for _, req := range reqs {
		if err != nil {
			req.done <- heartbeatResult{err: translate(err)}
			continue
		}
		key := batchKey{req.tenant, req.serverID}
		res, ok := results[key]
		if !ok {
			res = heartbeatResult{err: heartbeat.ErrNotFound}
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

// batchKey identifies a heartbeat's answer: RLS scopes each tenant's
// statement, so a server id found under another tenant is not found.
type batchKey struct{ tenant, serverID uuid.UUID }

func (s *Store) execBatch(ctx context.Context, reqs []*heartbeatRequest) (map[batchKey]heartbeatResult, error) {
	byTenant := make(map[uuid.UUID][]uuid.UUID)
	var order []uuid.UUID
	for _, r := range reqs {
		if _, ok := byTenant[r.tenant]; !ok {
			order = append(order, r.tenant)
		}
		byTenant[r.tenant] = append(byTenant[r.tenant], r.serverID)
	}
	now := s.now()
	var pb pgx.Batch
	for _, tenant := range order {
		pb.Queue(setTenant, tenant.String())
		// Lock first, in a statement of its own: the heartbeat statement
		// then takes its snapshot after any sweep that held these rows has
		// committed, so it sees the skills that sweep took away.
		pb.Queue(lockServersSQL, byTenant[tenant])
		pb.Queue(heartbeatBatchSQL, byTenant[tenant], now)
	}
	br := s.pool.SendBatch(ctx, &pb)
	results := make(map[batchKey]heartbeatResult, len(reqs))
	for _, tenant := range order {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return nil, err
		}
		for rows.Next() {
			var r heartbeatRow
			if err := rows.Scan(r.dest()...); err != nil {
				rows.Close()
				_ = br.Close()
				return nil, err
			}
			results[batchKey{tenant, r.prevID}] = r.result()
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	// Close reads the pipeline's end: the implicit transaction's commit.
	if err := br.Close(); err != nil {
		return nil, err
	}
	return results, nil
}

func (r *heartbeatRow) result() heartbeatResult {
	if r.prevStatus == string(heartbeat.StatusDeregistered) {
		return heartbeatResult{err: heartbeat.ErrDeregistered}
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
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}
