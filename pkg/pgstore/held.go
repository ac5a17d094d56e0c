package pgstore

import (
	"context"

	"github.com/google/uuid"

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
	servers := make([][16]byte, len(beats))
	ages := make([]int64, len(beats))
	for i, b := range beats {
		servers[i], ages[i] = b.ServerID, max(b.Age, 0).Microseconds()
	}
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

func (s *Store) writeHeld(ctx context.Context, tenant uuid.UUID, servers [][16]byte, ages []int64) ([]store.HeldOutcome, error) {
	rows, err := s.pool.Query(ctx, heldSQL, [16]byte(tenant), servers, ages, s.now())
	if err != nil {
		return nil, err
	}
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
		case *prev == string(registry.StatusHealthy):
			// Recovered meanwhile by a heartbeat of its own: written.
		default:
			r.prevStatus = *prev
			res := r.result()
			out = append(out, store.HeldOutcome{ServerID: r.prevID, Server: res.srv, Event: res.ev, Err: res.err})
		}
	}
	// Committed once the rows are read without error: the statement ran in
	// its own implicit transaction.
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
