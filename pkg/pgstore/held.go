package pgstore

import (
	"cmp"
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.HeldHeartbeatWriter = (*Store)(nil)

// heldSQL writes tenant $1's held heartbeats: servers $2 received $3
// microseconds before $4 (NULL: now()); rows only for the servers that were
// not healthy (migration 0021).
const heldSQL = `SELECT * FROM mcp_heartbeat_held($1::uuid, $2::uuid[], $3::bigint[], $4::timestamptz)`

// WriteHeldHeartbeats records tenant's held heartbeats in one statement
// (one transaction), routed to the tenant's shard on Citus; a deadlock
// with a concurrent batch is retried once.
func (s *Store) WriteHeldHeartbeats(ctx context.Context, tenant uuid.UUID, beats []store.HeldHeartbeat) ([]store.HeldOutcome, error) {
	if len(beats) == 0 {
		return nil, nil
	}
	servers, ages := heldArrays(beats)
	var (
		out []store.HeldOutcome
		err error
	)
	for range 2 {
		if out, err = s.writeHeld(ctx, tenant, servers, ages); !isRetryable(err) {
			break
		}
	}
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// heldArrays returns beats as the servers and ages (microseconds) of
// heldSQL.
func heldArrays(beats []store.HeldHeartbeat) (servers [][16]byte, ages []int64) {
	servers = make([][16]byte, len(beats))
	ages = make([]int64, len(beats))
	for i, b := range beats {
		servers[i], ages[i] = b.ServerID, max(b.Age, 0).Microseconds()
	}
	return servers, ages
}

func (s *Store) writeHeld(ctx context.Context, tenant uuid.UUID, servers [][16]byte, ages []int64) ([]store.HeldOutcome, error) {
	rows, err := s.writeQuery(ctx, heldSQL, [16]byte(tenant), servers, ages, s.now())
	if err != nil {
		return nil, err
	}
	// Committed once the rows are read without error: the statement ran in
	// its own implicit transaction.
	return scanHeld(rows)
}

// scanHeld reads the rows of heldSQL into the outcomes of the servers that
// were not simply healthy, and closes rows.
func scanHeld(rows pgx.Rows) ([]store.HeldOutcome, error) {
	defer rows.Close()
	var (
		t   uuid.UUID
		r   heartbeatRow
		out []store.HeldOutcome
	)
	dest := append([]any{&t}, r.dest()...)
	for rows.Next() {
		r = heartbeatRow{}
		var prev *string
		dest[2] = &prev
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		switch {
		case prev == nil:
			out = append(out, store.HeldOutcome{ServerID: r.prevID, Err: registry.ErrNotFound})
		case *prev == "busy":
			out = append(out, store.HeldOutcome{ServerID: r.prevID, Err: store.ErrBusy})
		case *prev == string(registry.StatusHealthy):
			// Recovered meanwhile by a heartbeat of its own: written.
		default:
			r.prevStatus = *prev
			res := r.result()
			out = append(out, store.HeldOutcome{ServerID: r.prevID, Server: res.srv, Event: res.ev, Err: res.err})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

var _ store.HeldBatchWriter = (*Store)(nil)

// WriteHeldBatch writes a flush of held heartbeats. On plain PostgreSQL
// the healthy servers' heartbeats of every tenant go in one statement
// (writeHeldTogether), and what it leaves (servers to recover, not the
// tenant's; every share when a row another transaction holds kept it
// waiting past its lock timeout) as a statement per tenant of one
// pipeline, run as one implicit transaction: one round trip and one
// commit, and a failure fails every share of it (a deadlock with a
// heartbeat batch is tried again once). On Citus the shares go in one
// call per worker (writeHeldPerWorker), so that a worker that is down
// fails its own tenants' shares only.
func (s *Store) WriteHeldBatch(ctx context.Context, batch []store.TenantHeld) []store.TenantHeldResult {
	out := make([]store.TenantHeldResult, len(batch))
	fail := func(err error) []store.TenantHeldResult {
		for i := range out {
			out[i] = store.TenantHeldResult{Err: err}
		}
		return out
	}
	citus, err := s.onCitus(ctx)
	if err != nil {
		return fail(translate(err))
	}
	if citus {
		s.writeHeldPerWorker(ctx, batch, out)
		return out
	}
	rest := s.writeHeldTogether(ctx, batch)
	if len(rest.left) == 0 {
		return out
	}
	var outcomes [][]store.HeldOutcome
	for range 2 {
		if outcomes, err = s.writeHeldPipeline(ctx, rest.left); !isRetryable(err) {
			break
		}
	}
	for j, i := range rest.index {
		if err != nil {
			out[i].Err = translate(err)
			continue
		}
		out[i].Outcomes = outcomes[j]
	}
	return out
}

// heldLeft is what writeHeldTogether left of a flush: the shares of left,
// each share i of the flush's index[i].
type heldLeft struct {
	left  []store.TenantHeld
	index []int
}

// writeHeldTogether writes the heartbeats of batch whose servers are
// healthy in one statement (mcp_heartbeat_held_group, which on plain
// PostgreSQL writes every tenant's pairs) and returns the rest, share by
// share: the heartbeats it did not write. A flush of a thousand tenants is
// one statement instead of a thousand (each planned and run on its own:
// at 1,000 tenants and 6,000 heartbeats/s a flush took longer than its
// window, docs/performance.md). The statement waits for a row another
// transaction holds, up to its lock timeout (50 ms) for each such row;
// when it fails, every share is left.
func (s *Store) writeHeldTogether(ctx context.Context, batch []store.TenantHeld) heldLeft {
	whole := heldLeft{left: batch, index: make([]int, len(batch))}
	for i := range batch {
		whole.index[i] = i
	}
	pairs, ages := heldPairs(batch)
	if len(pairs) == 0 {
		return whole
	}
	written, err := s.writeHeldGroup(ctx, pairs, ages)
	if err != nil {
		return whole
	}
	var rest heldLeft
	for i, sh := range batch {
		var beats []store.HeldHeartbeat
		for _, b := range sh.Beats {
			if !written[batchKey{sh.Tenant, b.ServerID}] {
				beats = append(beats, b)
			}
		}
		if len(beats) > 0 {
			rest.left = append(rest.left, store.TenantHeld{Tenant: sh.Tenant, Beats: beats})
			rest.index = append(rest.index, i)
		}
	}
	return rest
}

// heldPairs returns the (tenant, server) pair of every heartbeat of batch
// and each pair's age in microseconds, as writeHeldGroup takes them.
func heldPairs(batch []store.TenantHeld) (pairs []batchKey, ages map[batchKey]int64) {
	ages = make(map[batchKey]int64)
	for _, sh := range batch {
		for _, b := range sh.Beats {
			k := batchKey{sh.Tenant, b.ServerID}
			pairs = append(pairs, k)
			ages[k] = max(b.Age, 0).Microseconds()
		}
	}
	return pairs, ages
}

// writeHeldPipeline sends every share of batch as a statement of one
// pipeline (one implicit transaction) and reads their outcomes.
func (s *Store) writeHeldPipeline(ctx context.Context, batch []store.TenantHeld) ([][]store.HeldOutcome, error) {
	var pb pgx.Batch
	at := s.now()
	for _, share := range batch {
		servers, ages := heldArrays(share.Beats)
		pb.Queue(heldSQL, [16]byte(share.Tenant), servers, ages, at)
	}
	br := s.pool.SendBatch(ctx, &pb)
	outcomes := make([][]store.HeldOutcome, len(batch))
	for i := range batch {
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return nil, err
		}
		if outcomes[i], err = scanHeld(rows); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	// The implicit transaction commits at the batch's end.
	if err := br.Close(); err != nil {
		return nil, err
	}
	return outcomes, nil
}

// heldGroupSQL writes the held heartbeats of the (tenant, server) pairs $2,
// $3, received $4 microseconds before $5 (NULL: now()), whose server is
// healthy, the tenants all on tenant $1's worker: one call that Citus hands
// to that worker (mcp_heartbeat_held_group). It returns the pairs written.
const heldGroupSQL = `SELECT o_tenant_id, o_server_id FROM mcp_heartbeat_held_group($1::uuid, $2::uuid[], $3::uuid[], $4::bigint[], $5::timestamptz)`

// writeHeldPerWorker writes a flush on Citus into out: the healthy
// servers' heartbeats in one call and one commit per worker that the flush
// reaches (the tenants of a worker together, as applyPerWorker does),
// then, tenant by tenant (mcp_heartbeat_held), the heartbeats that call did
// not write: servers not healthy (to recover), not the tenant's, or held
// by another transaction. A worker's call that fails (the worker down, a
// row held too long, the tenants' shards moved) sends its tenants' shares
// whole the tenant-by-tenant way, so that each share gets its own answer.
func (s *Store) writeHeldPerWorker(ctx context.Context, batch []store.TenantHeld, out []store.TenantHeldResult) {
	share := make(map[uuid.UUID]int, len(batch))
	for i, sh := range batch {
		if _, twice := share[sh.Tenant]; twice {
			// Not a flush's shape (one share per tenant): each on its own.
			s.writeHeldEach(ctx, batch, out)
			return
		}
		share[sh.Tenant] = i
	}
	pairs, ages := heldPairs(batch)
	groups, workers, err := s.workerGroupsOf(ctx, pairs)
	if err != nil {
		s.writeHeldEach(ctx, batch, out)
		return
	}
	// The workers' calls, then what each left, tenant by tenant, a few at
	// a time. The tenants of a worker that stalls fail, for the next flush
	// (a call that commits late only writes heartbeats again: a server's
	// last_heartbeat_at never moves back).
	type groupWrite struct {
		written map[batchKey]bool
		err     error
	}
	// A worker found hung (stall.go) is not called: its tenants' shares
	// fail at once and stay held for the next flush. A flush that waited
	// the stall time for it at every window held the flush's lock that
	// long each time, and the monitor's sweep, which flushes first,
	// waited for that lock past its own time at every sweep: no tenant of
	// any worker was swept while one hung (a black-box run, 2026-12-07).
	writes, done := awaitWorkers(ctx, s.workerCalls.stall, len(groups), func(wctx context.Context, g int) groupWrite {
		var w groupWrite
		w.err = s.workerCalls.onWorker(wctx, workers[g], groups[g][0].tenant, func(cctx context.Context) (err error) {
			w.written, err = s.writeHeldGroup(cctx, groups[g], ages)
			return err
		})
		if w.err != nil && !errors.Is(w.err, ErrWorkerStalled) && workerFault(w.err) && wctx.Err() == nil {
			s.forgetWorkers(groups[g])
		}
		return w
	})
	rest := make([][]store.HeldHeartbeat, len(batch))
	for g, w := range writes {
		if !done[g] {
			w.err = cmp.Or(translate(ctx.Err()), ErrWorkerStalled)
		}
		for _, own := range groupPairs(groups[g], func(p batchKey) uuid.UUID { return p.tenant }) {
			i := share[own[0].tenant]
			if !done[g] || errors.Is(w.err, ErrWorkerStalled) {
				out[i].Err = w.err
				continue
			}
			for _, b := range batch[i].Beats {
				if w.err != nil || !w.written[batchKey{batch[i].Tenant, b.ServerID}] {
					rest[i] = append(rest[i], b)
				}
			}
		}
	}
	var left []int
	for i := range batch {
		if len(rest[i]) > 0 {
			left = append(left, i)
		}
	}
	eachTenant(len(left), func(j int) {
		i := left[j]
		out[i].Outcomes, out[i].Err = s.WriteHeldHeartbeats(ctx, batch[i].Tenant, rest[i])
	})
}

// writeHeldEach writes each share of batch in a call of its own, routed to
// its tenant's shard, a few at a time.
func (s *Store) writeHeldEach(ctx context.Context, batch []store.TenantHeld, out []store.TenantHeldResult) {
	eachTenant(len(batch), func(i int) {
		out[i].Outcomes, out[i].Err = s.WriteHeldHeartbeats(ctx, batch[i].Tenant, batch[i].Beats)
	})
}

// writeHeldGroup writes the held heartbeats of pairs, whose tenants share a
// worker, for the servers that are healthy, in one call, and returns the
// pairs written.
func (s *Store) writeHeldGroup(ctx context.Context, pairs []batchKey, ages map[batchKey]int64) (map[batchKey]bool, error) {
	tenants, servers := pairArrays(pairs)
	pairAges := make([]int64, len(pairs))
	for i, p := range pairs {
		pairAges[i] = ages[p]
	}
	rows, err := s.writeQuery(ctx, heldGroupSQL, tenants[0], tenants, servers, pairAges, s.now())
	if err != nil {
		return nil, err
	}
	written, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (batchKey, error) {
		var k batchKey
		err := row.Scan(&k.tenant, &k.serverID)
		return k, err
	})
	if err != nil {
		return nil, err
	}
	// Committed once its rows are read without error: the statement ran in
	// its own implicit transaction.
	out := make(map[batchKey]bool, len(written))
	for _, k := range written {
		out[k] = true
	}
	return out, nil
}
