package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// Group commit on the heartbeat path: concurrent heartbeats are gathered
// into batches and each batch, whatever its tenants, is applied by one call of
// mcp_heartbeat (migration 0007): one statement, one round trip and one
// commit for the whole batch. A caller is answered only after its batch has
// committed; a failed batch answers each of its callers with the error.
// Under light load a batch is a single heartbeat, sent at once.

// lockServersSQL locks the servers of a batch in server_id order, so that
// concurrent batches cannot deadlock.
const lockServersSQL = `SELECT 1 FROM mcp_servers WHERE server_id = ANY($1::uuid[]) ORDER BY server_id FOR UPDATE`

// heartbeatBatchSQL applies the heartbeats of the (tenant, server) pairs $1,
// $2 at $3 (NULL: now()): one row per pair whose server exists under that
// tenant, with its previous status, the server after the heartbeat and the
// recovery event, if any.
const heartbeatBatchSQL = `SELECT * FROM mcp_heartbeat($1::uuid[], $2::uuid[], $3::timestamptz)`

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

// batchKey identifies a heartbeat's answer: mcp_heartbeat matches a server
// on its tenant and its id, so a server id under another tenant is not found.
type batchKey struct{ tenant, serverID uuid.UUID }

func (s *Store) execBatch(ctx context.Context, reqs []*heartbeatRequest) (map[batchKey]heartbeatResult, error) {
	tenants := make([]uuid.UUID, 0, len(reqs))
	servers := make([]uuid.UUID, 0, len(reqs))
	seen := make(map[batchKey]struct{}, len(reqs))
	for _, r := range reqs {
		key := batchKey{r.tenant, r.serverID}
		if _, dup := seen[key]; dup {
			continue
		}
		seen[key] = struct{}{}
		tenants = append(tenants, r.tenant)
		servers = append(servers, r.serverID)
	}
	rows, err := s.pool.Query(ctx, heartbeatBatchSQL, tenants, servers, s.now())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	results := make(map[batchKey]heartbeatResult, len(tenants))
	var (
		tenant uuid.UUID
		r      heartbeatRow
	)
	dest := append([]any{&tenant}, r.dest()...)
	for rows.Next() {
		r = heartbeatRow{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		results[batchKey{tenant, r.prevID}] = r.result()
	}
	// The statement ran in its own implicit transaction: no error here
	// means it has committed.
	if err := rows.Err(); err != nil {
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
