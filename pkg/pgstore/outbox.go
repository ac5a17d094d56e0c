package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

var _ heartbeat.AlertOutbox = (*Store)(nil)

// alertClaim holds a destination's advisory lock on one pooled connection
// while its events are delivered. No transaction stays open, so the claim
// holds back no other destination's horizon, and a replica that dies drops
// the lock with its connection.
type alertClaim struct {
	conn        *pgxpool.Conn
	destination string
	events      []heartbeat.Event
	txids       []string
	ended       bool
}

func (c *alertClaim) Events() []heartbeat.Event { return c.events }

func (c *alertClaim) Ack(ctx context.Context, n int) error {
	if c.ended {
		return fmt.Errorf("alert claim of %s already ended", c.destination)
	}
	defer c.Release(ctx)
	n = min(n, len(c.events))
	if n == 0 {
		return nil
	}
	last := n - 1
	_, err := c.conn.Exec(ctx, `SELECT mcp_alert_ack($1, $2, $3)`, c.destination, c.txids[last], c.events[last].Seq)
	return translate(err)
}

func (c *alertClaim) Release(ctx context.Context) {
	if c.ended {
		return
	}
	c.ended = true
	if _, err := c.conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, alertLockKey(c.destination)); err != nil {
		// The lock dies with the connection.
		_ = c.conn.Hijack().Close(context.WithoutCancel(ctx))
		return
	}
	c.conn.Release()
}

func alertLockKey(destination string) string { return "mcpd.alert:" + destination }

// ClaimAlerts takes destination's advisory lock and returns the alert events
// after its cursor; nil when another replica holds the lock.
func (s *Store) ClaimAlerts(ctx context.Context, destination string, limit int) (heartbeat.AlertClaim, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, translate(err)
	}
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, alertLockKey(destination)).Scan(&locked); err != nil {
		conn.Release()
		return nil, translate(err)
	}
	if !locked {
		conn.Release()
		return nil, nil
	}
	claim := &alertClaim{conn: conn, destination: destination}
	rows, err := conn.Query(ctx, `
SELECT txid, seq, event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
       trace_id, occurred_at, body
FROM mcp_alert_claim($1, $2)`, destination, limit)
	if err != nil {
		claim.Release(ctx)
		return nil, translate(err)
	}
	for rows.Next() {
		var (
			ev    heartbeat.Event
			txid  string
			kind  string
			from  *string
			to    string
			trace *string
			body  []byte
		)
		if err := rows.Scan(&txid, &ev.Seq, &ev.EventID, &ev.TenantID, &kind, &ev.ServerID, &ev.ModuleName,
			&from, &to, &trace, &ev.OccurredAt, &body); err != nil {
			rows.Close()
			claim.Release(ctx)
			return nil, translate(err)
		}
		ev.Kind, ev.ToStatus = heartbeat.EventKind(kind), heartbeat.Status(to)
		if err := finishEvent(&ev, from, trace, body); err != nil {
			rows.Close()
			claim.Release(ctx)
			return nil, err
		}
		claim.events = append(claim.events, ev)
		claim.txids = append(claim.txids, txid)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		claim.Release(ctx)
		return nil, translate(err)
	}
	return claim, nil
}

// PendingAlerts counts destination's unacknowledged alert events.
func (s *Store) PendingAlerts(ctx context.Context, destination string) (int64, time.Time, error) {
	var (
		n      int64
		oldest *time.Time
	)
	if err := s.pool.QueryRow(ctx, `SELECT pending, oldest FROM mcp_alert_pending($1)`, destination).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, translate(err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, oldest.UTC(), nil
}

// UnhealthyServers lists every tenant's unhealthy servers.
func (s *Store) UnhealthyServers(ctx context.Context) ([]heartbeat.UnhealthyServer, error) {
	rows, err := s.pool.Query(ctx, `
SELECT server_id, tenant_id, module_name, version, last_heartbeat_at, trace_id, unhealthy_since
FROM mcp_unhealthy_servers()`)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (heartbeat.UnhealthyServer, error) {
		var (
			u     heartbeat.UnhealthyServer
			trace *string
			since *time.Time
		)
		err := row.Scan(&u.ServerID, &u.TenantID, &u.ModuleName, &u.Version, &u.LastHeartbeatAt, &trace, &since)
		u.LastHeartbeatAt = u.LastHeartbeatAt.UTC()
		if trace != nil {
			u.TraceID = strings.TrimSpace(*trace)
		}
		if since != nil {
			u.UnhealthySince = since.UTC()
		}
		return u, err
	})
	return out, translate(err)
}
