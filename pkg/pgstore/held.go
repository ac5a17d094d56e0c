package pgstore

import (
	"context"

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
	rows, err := s.pool.Query(ctx, heldSQL, [16]byte(tenant), servers, ages, s.now())
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
// each tenant's share is a statement of one pipeline, run as one implicit
// transaction: one round trip and one commit for the whole flush, and a
// failure fails every share (a deadlock with a heartbeat batch is tried
// again once). On Citus each share is a transaction of its own, routed to
// its tenant's shard, a few at a time, so that a worker that is down fails
// its own tenants' shares only.
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
		eachTenant(len(batch), func(i int) {
			out[i].Outcomes, out[i].Err = s.WriteHeldHeartbeats(ctx, batch[i].Tenant, batch[i].Beats)
		})
		return out
	}
	var outcomes [][]store.HeldOutcome
	for range 2 {
		if outcomes, err = s.writeHeldPipeline(ctx, batch); !isRetryable(err) {
			break
		}
	}
	if err != nil {
		return fail(translate(err))
	}
	for i := range out {
		out[i].Outcomes = outcomes[i]
	}
	return out
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
