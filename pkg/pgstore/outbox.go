package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

var _ heartbeat.AlertOutbox = (*Store)(nil)

// alertClaim holds a destination's cursor row lock in an open transaction
// while its events are delivered.
type alertClaim struct {
	tx          pgx.Tx
	destination string
	events      []heartbeat.Event
	txids       []string
}

func (c *alertClaim) Events() []heartbeat.Event { return c.events }

func (c *alertClaim) Ack(ctx context.Context, n int) error {
	defer func() { _ = c.tx.Rollback(context.WithoutCancel(ctx)) }()
	if n > len(c.events) {
		n = len(c.events)
	}
	if n > 0 {
		last := n - 1
		if _, err := c.tx.Exec(ctx, `SELECT mcp_alert_ack($1, $2, $3)`, c.destination, c.txids[last], c.events[last].Seq); err != nil {
			return translate(err)
		}
	}
	return translate(c.tx.Commit(ctx))
}

func (c *alertClaim) Release(ctx context.Context) { _ = c.tx.Rollback(context.WithoutCancel(ctx)) }

// ClaimAlerts claims destination's cursor and returns the alert events after
// it; nil when another replica holds the cursor.
func (s *Store) ClaimAlerts(ctx context.Context, destination string, limit int) (heartbeat.AlertClaim, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, translate(err)
	}
	claim := &alertClaim{tx: tx, destination: destination}
	rows, err := tx.Query(ctx, `
SELECT claimed, txid, seq, event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
       trace_id, occurred_at, body
FROM mcp_alert_claim($1, $2)`, destination, limit)
	if err != nil {
		claim.Release(ctx)
		return nil, translate(err)
	}
	claimed := true
	for rows.Next() {
		var (
			ok               bool
			txid             *string
			ev               heartbeat.Event
			seq              *int64
			kind, module, to *string
			from, trace      *string
			occurred         *time.Time
			body             []byte
		)
		if err := rows.Scan(&ok, &txid, &seq, &ev.EventID, &ev.TenantID, &kind, &ev.ServerID, &module, &from, &to,
			&trace, &occurred, &body); err != nil {
			rows.Close()
			claim.Release(ctx)
			return nil, translate(err)
		}
		if !ok {
			claimed = false
			continue
		}
		ev.Seq, ev.Kind, ev.ModuleName, ev.ToStatus = *seq, heartbeat.EventKind(*kind), *module, heartbeat.Status(*to)
		if from != nil {
			st := heartbeat.Status(*from)
			ev.FromStatus = &st
		}
		if trace != nil {
			ev.TraceID = strings.TrimSpace(*trace)
		}
		ev.OccurredAt = occurred.UTC()
		if err := json.Unmarshal(body, &ev.Body); err != nil {
			rows.Close()
			claim.Release(ctx)
			return nil, fmt.Errorf("decode event body: %w", err)
		}
		claim.events = append(claim.events, ev)
		claim.txids = append(claim.txids, *txid)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		claim.Release(ctx)
		return nil, translate(err)
	}
	if !claimed {
		claim.Release(ctx)
		return nil, nil
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
