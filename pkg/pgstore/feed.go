package pgstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/registry"
)

// The feed reads positions (txid, seq) below the horizon, the oldest
// transaction still running: see migrations/0009_change_feed.up.sql.

// parseXid8 reads an xid8 that a statement cast to text.
func parseXid8(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse xid8 %q: %w", s, err)
	}
	return v, nil
}

func xid8Text(v uint64) string { return strconv.FormatUint(v, 10) }

// horizonPosition makes the position of a horizon read as (timeline, xmin).
func horizonPosition(timeline int64, horizon string) (registry.Position, error) {
	x, err := parseXid8(horizon)
	if err != nil {
		return registry.Position{}, err
	}
	return registry.Position{Epoch: uint64(timeline), TxID: x}, nil
}

const horizonSQL = `SELECT timeline, horizon::text FROM mcp_feed_horizon()`

// Horizon returns the present position.
func (s *Store) Horizon(ctx context.Context) (registry.Position, error) {
	var (
		timeline int64
		horizon  string
	)
	if err := s.pool.QueryRow(ctx, horizonSQL).Scan(&timeline, &horizon); err != nil {
		return registry.Position{}, translate(err)
	}
	return horizonPosition(timeline, horizon)
}

// feedColumns are the event columns of mcp_feed_read and of a tenant's
// trail read, after (timeline, horizon); the event's are NULL on the row
// that carries the horizon alone.
const feedColumns = `timeline, horizon::text, txid::text, seq, event_id, tenant_id, kind, server_id,
	module_name, from_status, to_status, trace_id, occurred_at, body`

// feedRow is one row of feedColumns: an event (ok) and the read's horizon.
type feedRow struct {
	ev      registry.Event
	ok      bool
	horizon registry.Position
}

func collectFeedRow(row pgx.CollectableRow) (feedRow, error) { return scanFeedRow(row) }

// scanFeedRow scans a row of feedColumns and then into extra.
func scanFeedRow(row rowScanner, extra ...any) (feedRow, error) {
	var (
		out      feedRow
		timeline int64
		hz       string
		txid     *string
		r        eventRow
	)
	dest := append(r.appendDest(append(make([]any, 0, 14+len(extra)), &timeline, &hz, &txid)), extra...)
	if err := row.Scan(dest...); err != nil {
		return out, err
	}
	var err error
	if out.horizon, err = horizonPosition(timeline, hz); err != nil || r.seq == nil {
		return out, err // seq NULL: the horizon alone
	}
	x, err := parseXid8(*txid)
	if err != nil {
		return out, err
	}
	if out.ev, out.ok, err = r.event(); err != nil || !out.ok {
		return out, err
	}
	out.ev.Position = registry.Position{Epoch: out.horizon.Epoch, TxID: x, Seq: *r.seq}
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

// ReadFeed returns at most limit events of every tenant after a position.
func (s *Store) ReadFeed(ctx context.Context, after registry.Position, limit int) (registry.FeedBatch, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+feedColumns+` FROM mcp_feed_read($1::text::xid8, $2, $3)`,
		xid8Text(after.TxID), after.Seq, limit)
	if err != nil {
		return registry.FeedBatch{}, translate(err)
	}
	all, err := pgx.CollectRows(rows, collectFeedRow)
	if err != nil {
		return registry.FeedBatch{}, translate(err)
	}
	events, horizon := feedEvents(all)
	return registry.FeedBatch{Events: events, Horizon: horizon}, nil
}

// CheckPosition returns p in the current timeline when tenant's trail can
// be resumed after it. A position of an event is honoured in any timeline
// while the event is still there (every event before it is then there
// too); a horizon position only in its own timeline and never ahead of the
// present, which a database restored elsewhere could be.
func (s *Store) CheckPosition(ctx context.Context, tenant uuid.UUID, p registry.Position) (registry.Position, error) {
	if p == (registry.Position{}) {
		return p, nil
	}
	var (
		timeline int64
		hz       string
		exists   bool
	)
	err := s.inTenant(ctx, tenant, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `
SELECT h.timeline, h.horizon::text,
       EXISTS (SELECT 1 FROM mcp_audit_events WHERE seq = $2 AND txid = $1::text::xid8)
FROM mcp_feed_horizon() h`, xid8Text(p.TxID), p.Seq).Scan(&timeline, &hz, &exists)
	})
	if err != nil {
		return registry.Position{}, err
	}
	now, err := horizonPosition(timeline, hz)
	if err != nil {
		return registry.Position{}, err
	}
	switch {
	case p.Seq > 0 && !exists,
		p.Seq == 0 && (p.Epoch != now.Epoch || p.TxID > now.TxID):
		return registry.Position{}, registry.ErrPositionExpired
	}
	p.Epoch = now.Epoch
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
