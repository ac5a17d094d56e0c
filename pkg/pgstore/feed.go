package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// The feed reads each tenant's positions, taken from its row of
// mcp_tenant_feed in the event's own transaction: see
// migrations/0017_feed_positions.up.sql.

// tenantPosition makes a position of a tenant's trail read in epoch.
func tenantPosition(epoch, position int64) registry.Position {
	return registry.Position{Epoch: uint64(epoch), Seq: position}
}

// horizonSQL reads a tenant's present position ($1).
const horizonSQL = `SELECT epoch, pos FROM mcp_feed_horizon($1)`

// positionSQL reads a tenant's present position ($1) without its epoch:
// the read made on a Citus worker, whose positions carry the cluster's
// epoch (readEpoch).
const positionSQL = `SELECT mcp_feed_position($1)`

// Horizon returns tenant's present position. On Citus it is Horizons of
// the one tenant: a call to the tenant's worker (workerCalls), made on the
// worker itself when the store can reach it (workerreads.go), awaited for
// the stall time at most: it fails with ErrWorkerStalled at once while
// the worker is silent, and after the stall time when the call has not
// returned by then (the call goes on in the background, within ctx's
// deadline).
func (s *Store) Horizon(ctx context.Context, tenant uuid.UUID) (registry.Position, error) {
	if citus, err := s.onCitus(ctx); err != nil || !citus {
		var epoch, pos int64
		if err := s.pool.QueryRow(ctx, horizonSQL, [16]byte(tenant)).Scan(&epoch, &pos); err != nil {
			return registry.Position{}, translate(err)
		}
		return tenantPosition(epoch, pos), nil
	}
	positions, errs := s.Horizons(ctx, []uuid.UUID{tenant})
	return positions[0], errs[0]
}

// Horizons returns the present positions of tenants, and the error of
// each tenant whose position could not be read (store.HorizonsReader):
// each tenant's read is Horizon's statement, and the statements of the
// tenants of one Citus worker go to it in one round trip, on the worker
// itself when the store can reach it. A worker that is silent fails its
// own tenants alone, as Horizon does; a tenant whose worker is not known
// is read on its own, through the coordinator. On plain PostgreSQL the
// statements go in one round trip to the database.
func (s *Store) Horizons(ctx context.Context, tenants []uuid.UUID) ([]registry.Position, []error) {
	return s.horizons(ctx, tenants, -1)
}

// NodeHorizons is Horizons of tenants of the Citus worker group node,
// made in the calling goroutine and waited for until it returns (within
// ctx), instead of the stall time at most (store.NodeHorizonsReader): for
// a caller that bounds its own callers' wait by NodeStall. Unless every
// tenant is on node, they are read as Horizons reads them, so that a
// worker that hangs holds up the call no longer than it would have.
func (s *Store) NodeHorizons(ctx context.Context, node int64, tenants []uuid.UUID) ([]registry.Position, []error) {
	return s.horizons(ctx, tenants, node)
}

// NodeStall is the stall time (Options.WorkerStall): how long Horizons
// waits for a worker's read.
func (s *Store) NodeStall() time.Duration { return s.workerCalls.stall }

var _ store.NodeHorizonsReader = (*Store)(nil)

// horizons reads the present positions of tenants (Horizons); when every
// tenant is on the worker group inline (not -1), the read runs in the
// calling goroutine.
func (s *Store) horizons(ctx context.Context, tenants []uuid.UUID, inline int64) ([]registry.Position, []error) {
	positions, errs := make([]registry.Position, len(tenants)), make([]error, len(tenants))
	if citus, err := s.onCitus(ctx); err != nil || !citus {
		read, err := readHorizons(ctx, s.pool, tenants, false)
		for i := range tenants {
			if err != nil {
				errs[i] = translate(err)
				continue
			}
			positions[i] = read[i]
		}
		return positions, errs
	}
	// The epoch before the reads (readEpoch).
	epoch, err := s.readEpoch(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = translate(err)
		}
		return positions, errs
	}
	// One call per worker; one per tenant whose worker is not known, so
	// that a worker that hangs holds up no tenant of another.
	type call struct {
		worker int64
		index  []int
		own    []uuid.UUID
	}
	var calls []call
	order, index := s.tenantsByWorker(ctx, tenants)
	for _, w := range order {
		if w < 0 {
			for _, i := range index[w] {
				calls = append(calls, call{w, []int{i}, []uuid.UUID{tenants[i]}})
			}
			continue
		}
		c := call{worker: w, index: index[w]}
		for _, i := range c.index {
			c.own = append(c.own, tenants[i])
		}
		calls = append(calls, c)
	}
	type read struct {
		at  []registry.Position
		err error
	}
	readCall := func(wctx context.Context, g int) read {
		c := calls[g]
		var r read
		r.err = s.workerCalls.onWorker(wctx, c.worker, c.own[0], func(cctx context.Context) error {
			return s.readOnWorker(cctx, c.worker, func(db querier, onWorker bool) (err error) {
				r.at, err = readHorizons(cctx, db, c.own, onWorker)
				for j := range r.at {
					r.at[j].Epoch = epoch
				}
				return err
			})
		})
		r.err = translate(r.err)
		return r
	}
	var (
		reads []read
		done  []bool
	)
	if inline >= 0 && len(calls) == 1 && calls[0].worker == inline {
		reads, done = []read{readCall(ctx, 0)}, []bool{true}
	} else {
		reads, done = awaitWorkers(ctx, s.workerCalls.stall, len(calls), readCall)
	}
	for g, c := range calls {
		for j, i := range c.index {
			switch {
			case !done[g]:
				errs[i] = cmp.Or(translate(ctx.Err()), ErrWorkerStalled)
			case reads[g].err != nil:
				errs[i] = reads[g].err
			default:
				positions[i] = reads[g].at[j]
			}
		}
	}
	return positions, errs
}

// tenantsByWorker returns the Citus workers of tenants (-1: not known,
// as for every tenant when the metadata cannot be read), in the order of
// their first tenant, and the indexes in tenants of each worker's.
func (s *Store) tenantsByWorker(ctx context.Context, tenants []uuid.UUID) (order []int64, index map[int64][]int) {
	workers, err := s.tenantWorkers(ctx, tenantKeys(tenants))
	if err != nil {
		workers = nil
	}
	index = make(map[int64][]int)
	for i, t := range tenants {
		w, ok := workers[t]
		if !ok {
			w = -1
		}
		if _, seen := index[w]; !seen {
			order = append(order, w)
		}
		index[w] = append(index[w], i)
	}
	return order, index
}

// readHorizons reads the present positions of tenants on db in one round
// trip: Horizon's statement for each, or, onWorker (a connection of a
// Citus worker), the position alone (positionSQL), whose epoch the caller
// gives. One tenant's read is one statement, not a pipeline.
func readHorizons(ctx context.Context, db querier, tenants []uuid.UUID, onWorker bool) ([]registry.Position, error) {
	out := make([]registry.Position, len(tenants))
	scan := func(row pgx.Row, i int) error {
		var epoch, pos int64
		var err error
		if onWorker {
			err = row.Scan(&pos)
		} else {
			err = row.Scan(&epoch, &pos)
		}
		out[i] = tenantPosition(epoch, pos)
		return err
	}
	read := horizonSQL
	if onWorker {
		read = positionSQL
	}
	if len(tenants) == 1 {
		if err := scan(db.QueryRow(ctx, read, [16]byte(tenants[0])), 0); err != nil {
			return nil, err
		}
		return out, nil
	}
	var b pgx.Batch
	for _, t := range tenants {
		b.Queue(read, [16]byte(t))
	}
	br := db.SendBatch(ctx, &b)
	for i := range tenants {
		if err := scan(br.QueryRow(), i); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, err
	}
	return out, nil
}

var _ store.HorizonsReader = (*Store)(nil)

// TenantRouted reports whether the store is on Citus, where each tenant's
// reads are routed to the worker of its shard (store.TenantRouter).
func (s *Store) TenantRouted(ctx context.Context) bool {
	citus, err := s.onCitus(ctx)
	return err == nil && citus
}

// TenantNode returns the group of tenant's Citus worker as the store last
// read it, 0 on plain PostgreSQL, and -1 when neither is known; it reads
// nothing from the database but, once, whether it is Citus
// (store.TenantRouter).
func (s *Store) TenantNode(ctx context.Context, tenant uuid.UUID) int64 {
	citus, err := s.onCitus(ctx)
	switch {
	case err != nil:
		return -1
	case !citus:
		return 0
	}
	s.placementMu.Lock()
	defer s.placementMu.Unlock()
	if pl, ok := s.placements[tenant]; ok {
		return pl.group
	}
	return -1
}

// feedColumns are the columns of a read of a tenant's trail: the epoch, the
// tenant's position in the read's snapshot, the event's position, and the
// event's columns (NULL on the row that carries the horizon alone).
const feedColumns = `epoch, horizon, event_position, seq, event_id, tenant_id, kind, server_id,
	module_name, from_status, to_status, trace_id, occurred_at, body`

// feedRow is one row of feedColumns: an event (ok) and the read's horizon.
type feedRow struct {
	ev      registry.Event
	ok      bool
	horizon registry.Position
}

// scanFeedRow scans a row of feedColumns, after the columns of before.
func scanFeedRow(row rowScanner, before ...any) (feedRow, error) {
	var (
		out       feedRow
		epoch, hz int64
		position  *int64
		r         eventRow
	)
	dest := r.appendDest(append(append(make([]any, 0, 14+len(before)), before...), &epoch, &hz, &position))
	if err := row.Scan(dest...); err != nil {
		return out, err
	}
	out.horizon = tenantPosition(epoch, hz)
	var err error
	if out.ev, out.ok, err = r.event(); err != nil || !out.ok {
		return out, err
	}
	if position == nil {
		return out, fmt.Errorf("audit row %s: no position", out.ev.EventID)
	}
	out.ev.Position = tenantPosition(epoch, *position)
	return out, nil
}

// feedEvents splits rows of feedColumns into the events and the horizon.
func feedEvents(rows []feedRow) ([]registry.Event, registry.Position) {
	var (
		events  []registry.Event
		horizon registry.Position
	)
	for _, r := range rows {
		horizon = r.horizon
		if r.ok {
			events = append(events, r.ev)
		}
	}
	return events, horizon
}

// ReadFeed returns at most limit events of each tenant after its position:
// one statement, one snapshot, for every tenant. On Citus a read that fails
// as unavailable (a worker is down) is made again one tenant at a time, so
// that the tenants of the other workers are read: it returns their batches
// and the error of the others, whose positions stay where they were.
func (s *Store) ReadFeed(ctx context.Context, tenants []uuid.UUID, after []registry.Position, limit int) ([]store.FeedBatch, error) {
	if len(after) != len(tenants) {
		return nil, fmt.Errorf("read feed: %d tenants, %d positions", len(tenants), len(after))
	}
	if len(tenants) == 0 {
		return nil, nil
	}
	from := make([]int64, len(after))
	for i, p := range after {
		from[i] = max(p.Seq, 0)
	}
	citus, err := s.onCitus(ctx)
	if err != nil {
		return nil, translate(err)
	}
	if !citus {
		return s.readFeed(ctx, s.pool, `SELECT feed_tenant, `+feedColumns+` FROM mcp_feed_read($1, $2, $3)`, tenants, from, limit)
	}
	// The epoch before the reads (readEpoch).
	epoch, err := s.readEpoch(ctx)
	if err != nil {
		return nil, translate(err)
	}
	batches, err := s.readFeedPerWorker(ctx, tenants, from, limit)
	withEpoch(batches, epoch)
	return batches, err
}

// feedReadEachSQL reads the trails of tenants $1 after $2, at most $3
// events each, a statement per tenant, each routed to its shard (0019).
const feedReadEachSQL = `SELECT feed_tenant, ` + feedColumns + ` FROM mcp_feed_read_each($1, $2, $3)`

// readFeedPerWorker reads the trails of tenants after from on Citus: the
// tenants of each worker in a call of their own (readFeedOnWorker), the
// workers' calls side by side. It waits for a worker's call until every
// call has returned or the stall time has passed: a worker still not
// answering then fails its own tenants (ErrWorkerStalled), and its call
// ends in the background (within ctx's deadline). It returns the batches
// read, in the order of tenants, and the first error.
func (s *Store) readFeedPerWorker(ctx context.Context, tenants []uuid.UUID, from []int64, limit int) ([]store.FeedBatch, error) {
	order, index := s.tenantsByWorker(ctx, tenants)
	type read struct {
		batches []store.FeedBatch
		err     error
	}
	reads, done := awaitWorkers(ctx, s.workerCalls.stall, len(order), func(wctx context.Context, g int) read {
		w := order[g]
		ts, fs := make([]uuid.UUID, len(index[w])), make([]int64, len(index[w]))
		for j, i := range index[w] {
			ts[j], fs[j] = tenants[i], from[i]
		}
		b, err := s.readFeedOnWorker(wctx, w, ts, fs, limit)
		return read{b, err}
	})
	byTenant := make(map[uuid.UUID]store.FeedBatch, len(tenants))
	var (
		firstErr error
		failed   int
	)
	for g, r := range reads {
		if !done[g] {
			r.err = cmp.Or(translate(ctx.Err()), ErrWorkerStalled)
		}
		for _, b := range r.batches {
			byTenant[b.Tenant] = b
		}
		if r.err != nil {
			failed += len(index[order[g]]) - len(r.batches)
			firstErr = cmp.Or(firstErr, r.err)
		}
	}
	out := make([]store.FeedBatch, 0, len(byTenant))
	for _, t := range tenants {
		if b, ok := byTenant[t]; ok {
			out = append(out, b)
		}
	}
	if firstErr != nil {
		firstErr = fmt.Errorf("read feed: %d of %d tenants: %w", failed, len(tenants), firstErr)
	}
	return out, firstErr
}

// readFeedOnWorker reads the trails of tenants, all on worker, as a call
// to that worker (workerCalls, made on the worker itself when the store
// can reach it: readOnWorker): in one call, then, when that call finds
// the database unavailable, in a call per tenant, so that a tenant whose
// shard is elsewhere (a stale placement) is still read.
func (s *Store) readFeedOnWorker(ctx context.Context, worker int64, tenants []uuid.UUID, from []int64, limit int) ([]store.FeedBatch, error) {
	var out []store.FeedBatch
	err := s.workerCalls.onWorker(ctx, worker, firstOf(tenants), func(cctx context.Context) error {
		return s.readOnWorker(cctx, worker, func(db querier, _ bool) (err error) {
			out, err = s.readFeed(cctx, db, feedReadEachSQL, tenants, from, limit)
			return err
		})
	})
	if err == nil || len(tenants) == 1 || !errors.Is(err, registry.ErrUnavailable) || errors.Is(err, ErrWorkerStalled) {
		return out, err
	}
	return s.readFeedEach(ctx, feedReadEachSQL, tenants, from, limit)
}

// withEpoch gives every position of batches, read on Citus, the cluster's
// epoch (readEpoch).
func withEpoch(batches []store.FeedBatch, epoch uint64) {
	for i := range batches {
		batches[i].Horizon.Epoch = epoch
		for j := range batches[i].Events {
			batches[i].Events[j].Position.Epoch = epoch
		}
	}
}

// readFeedEach reads each tenant's trail in a call of its own, a few at a
// time, and returns the batches read and the first error.
func (s *Store) readFeedEach(ctx context.Context, read string, tenants []uuid.UUID, from []int64, limit int) ([]store.FeedBatch, error) {
	got := make([][]store.FeedBatch, len(tenants))
	errs := make([]error, len(tenants))
	eachTenant(len(tenants), func(i int) {
		got[i], errs[i] = s.readFeed(ctx, s.pool, read, tenants[i:i+1], from[i:i+1], limit)
	})
	var (
		out      []store.FeedBatch
		firstErr error
		failed   int
	)
	for i, err := range errs {
		if err != nil {
			failed++
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		out = append(out, got[i]...)
	}
	if firstErr != nil {
		firstErr = fmt.Errorf("read feed: %d of %d tenants: %w", failed, len(tenants), firstErr)
	}
	return out, firstErr
}

// readFeed runs read, a feed read of tenants after from, on db, and
// returns its batches, one per tenant, in the order asked.
func (s *Store) readFeed(ctx context.Context, db querier, read string, tenants []uuid.UUID, from []int64, limit int) ([]store.FeedBatch, error) {
	rows, err := db.Query(ctx, read, tenants, from, limit)
	if err != nil {
		return nil, translate(err)
	}
	// Each tenant asked has its rows: its events, or one row that carries
	// its horizon alone.
	batches := make([]store.FeedBatch, len(tenants))
	seen := make([]bool, len(tenants))
	index := make(map[uuid.UUID]int, len(tenants))
	for i, t := range tenants {
		batches[i].Tenant = t
		index[t] = i
	}
	defer rows.Close()
	for rows.Next() {
		var tenant uuid.UUID
		r, err := scanFeedRow(rows, &tenant)
		if err != nil {
			return nil, translate(err)
		}
		i, ok := index[tenant]
		if !ok {
			return nil, fmt.Errorf("read feed: a row of tenant %s, which was not asked", tenant)
		}
		seen[i] = true
		batches[i].Horizon = r.horizon
		if r.ok {
			batches[i].Events = append(batches[i].Events, r.ev)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("read feed: no row of tenant %s", tenants[i])
		}
	}
	return batches, nil
}

// CheckPosition returns p when tenant's trail can be resumed after it: a
// position of the current epoch at or before the tenant's present one. A
// position of another epoch (the database failed over: the same number may
// name another event now), of the format of transaction ids (TxID set), or
// ahead of the present (a database restored elsewhere) is expired.
func (s *Store) CheckPosition(ctx context.Context, tenant uuid.UUID, p registry.Position) (registry.Position, error) {
	if p == (registry.Position{}) {
		return p, nil
	}
	if p.TxID != 0 || p.Seq < 0 {
		return registry.Position{}, registry.ErrPositionExpired
	}
	now, err := s.Horizon(ctx, tenant)
	if err != nil {
		return registry.Position{}, err
	}
	if p.Epoch != now.Epoch || p.Seq > now.Seq {
		return registry.Position{}, registry.ErrPositionExpired
	}
	return p, nil
}

// FeedChanged returns nil: the feed of PostgreSQL is polled, which works
// through a connection pooler and costs one indexed read per poll.
func (s *Store) FeedChanged() <-chan struct{} { return nil }

// CursorKey returns the secret that seals cursors, made by migration 0009.
func (s *Store) CursorKey(ctx context.Context) ([]byte, error) {
	var key []byte
	if err := s.pool.QueryRow(ctx, `SELECT mcp_cursor_key()`).Scan(&key); err != nil {
		return nil, translate(err)
	}
	return key, nil
}
