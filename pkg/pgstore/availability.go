package pgstore

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.AvailabilityReader = (*Store)(nil)

// availabilityNow is the clock of an availability read: the store's clock, or
// the database's when it has none.
func (s *Store) availabilityNow(ctx context.Context, req registry.AvailabilityRequest) (time.Time, error) {
	if !req.Now.IsZero() {
		return req.Now, nil
	}
	if s.clock != nil {
		return s.clock.Now(), nil
	}
	var now time.Time
	err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now)
	return now, translate(err)
}

// serverAvailabilitySQL computes one server's availability over [$3, $4]
// in the database, by the index of migration 0020 (tenant_id, server_id,
// occurred_at, position, including to_status), every read index-only: h is the
// status before the window (one row read backwards) and how long it lasted
// into the window (one probe); a sums the time of each transition in the
// window until the next, in one pass in index order (lead() needs no
// sort; the sums are intervals, turned into microseconds once); o is the
// newest $5 outages, from a backward scan that stops when it has them.
// The part before the window's first transition (h) is added in Go. A
// server with 10,000 transitions in 30 days costs a few milliseconds of
// the server's CPU (docs/performance.md).
const serverAvailabilitySQL = `
SELECT EXISTS (SELECT 1 FROM mcp_servers WHERE tenant_id = $1 AND server_id = $2),
       h.st, h.until, a.n, a.healthy, a.degraded, a.unhealthy, a.deregistered,
       o.froms, o.untils, o.statuses
FROM (SELECT (SELECT e.to_status FROM mcp_audit_events e
              WHERE e.tenant_id = $1 AND e.server_id = $2 AND e.occurred_at < $3
              ORDER BY e.occurred_at DESC, e.position DESC LIMIT 1) AS st,
             COALESCE((SELECT min(e.occurred_at) FROM mcp_audit_events e
                       WHERE e.tenant_id = $1 AND e.server_id = $2 AND e.occurred_at >= $3 AND e.occurred_at <= $4),
                      $4) AS until) h,
     (SELECT count(*) AS n,
             COALESCE((extract(epoch FROM sum(until - at) FILTER (WHERE st = 'healthy')) * 1000000)::bigint, 0) AS healthy,
             COALESCE((extract(epoch FROM sum(until - at) FILTER (WHERE st = 'degraded')) * 1000000)::bigint, 0) AS degraded,
             COALESCE((extract(epoch FROM sum(until - at) FILTER (WHERE st = 'unhealthy')) * 1000000)::bigint, 0) AS unhealthy,
             COALESCE((extract(epoch FROM sum(until - at) FILTER (WHERE st = 'deregistered')) * 1000000)::bigint, 0) AS deregistered
      FROM (SELECT e.occurred_at AS at, e.to_status AS st,
                   lead(e.occurred_at, 1, $4) OVER (ORDER BY e.occurred_at, e.position) AS until
            FROM mcp_audit_events e
            WHERE e.tenant_id = $1 AND e.server_id = $2 AND e.occurred_at >= $3 AND e.occurred_at <= $4) w) a,
     (SELECT array_agg(at ORDER BY at DESC) AS froms, array_agg(until ORDER BY at DESC) AS untils,
             array_agg(st ORDER BY at DESC) AS statuses
      FROM (SELECT at, until, st
            FROM (SELECT e.occurred_at AS at, e.to_status AS st,
                         lag(e.occurred_at, 1, $4) OVER (ORDER BY e.occurred_at DESC, e.position DESC) AS until
                  FROM mcp_audit_events e
                  WHERE e.tenant_id = $1 AND e.server_id = $2 AND e.occurred_at >= $3 AND e.occurred_at <= $4
                  ORDER BY e.occurred_at DESC, e.position DESC) x
            WHERE st IN ('unhealthy', 'deregistered') AND until > at
            LIMIT $5) y) o`

// outageRows is how many outages serverAvailabilitySQL returns: room for
// registry.MergeOutages to join those that a zero-length transition split.
const outageRows = 2 * registry.MaxOutages

type availabilityRow struct {
	found       bool
	headStatus  *string
	headUntil   time.Time
	transitions int64
	us          [4]int64
	froms       []time.Time
	untils      []time.Time
	statuses    []string
}

func collectAvailabilityRow(row pgx.CollectableRow) (availabilityRow, error) {
	var r availabilityRow
	err := row.Scan(&r.found, &r.headStatus, &r.headUntil, &r.transitions, &r.us[0], &r.us[1], &r.us[2], &r.us[3],
		&r.froms, &r.untils, &r.statuses)
	return r, err
}

// ServerAvailability is one of tenant's servers' availability over a
// window, computed from its audit trail in one statement.
func (s *Store) ServerAvailability(ctx context.Context, tenant, serverID uuid.UUID, req registry.AvailabilityRequest) (registry.Availability, error) {
	now, err := s.availabilityNow(ctx, req)
	if err != nil {
		return registry.Availability{}, err
	}
	w, from, to := req.Bounds(now)
	rows, err := queryInTenant(ctx, s, tenant, collectAvailabilityRow, serverAvailabilitySQL,
		tenant, serverID, from, to, outageRows)
	if err != nil {
		return registry.Availability{}, err
	}
	if len(rows) == 0 || !rows[0].found {
		return registry.Availability{}, registry.ErrNotFound
	}
	r := rows[0]
	outages := make([]registry.Outage, len(r.froms), len(r.froms)+1)
	for i := range r.froms {
		outages[i] = registry.Outage{From: r.froms[i].UTC(), To: r.untils[i].UTC(), Status: registry.Status(r.statuses[i])}
	}
	// The status the window starts in, until its first transition.
	if r.headStatus != nil && r.headUntil.After(from) {
		st := registry.Status(*r.headStatus)
		if i := slices.Index(registry.Statuses, st); i >= 0 {
			r.us[i] += r.headUntil.Sub(from).Microseconds()
		}
		if (st == registry.StatusUnhealthy || st == registry.StatusDeregistered) && len(r.froms) < outageRows {
			outages = append(outages, registry.Outage{From: from, To: r.headUntil.UTC(), Status: st})
		}
	}
	return registry.NewAvailability(w, from, to, r.us, registry.MergeOutages(outages), int(r.transitions)), nil
}

// skillTimelinesSQL reads the timelines of the servers that declare skill
// $2: for each, its status before $3 (a row with k = 0, null when it had
// none) and its transitions in [$3, $4] (k = 1), in time and commit order.
const skillTimelinesSQL = `
WITH p AS (SELECT DISTINCT server_id FROM mcp_skills WHERE tenant_id = $1 AND name = $2)
SELECT p.server_id, 0 AS k, b.occurred_at, b.to_status, 0::bigint AS seq
FROM p LEFT JOIN LATERAL (
    SELECT e.occurred_at, e.to_status FROM mcp_audit_events e
    WHERE e.tenant_id = $1 AND e.server_id = p.server_id AND e.occurred_at < $3
    ORDER BY e.occurred_at DESC, e.position DESC LIMIT 1) b ON true
UNION ALL
SELECT e.server_id, 1, e.occurred_at, e.to_status, e.position
FROM p JOIN mcp_audit_events e
  ON e.tenant_id = $1 AND e.server_id = p.server_id AND e.occurred_at >= $3 AND e.occurred_at <= $4
ORDER BY 1, 2, 3, 5`

type timelineRow struct {
	serverID uuid.UUID
	k        int
	at       *time.Time
	status   *string
}

func collectTimelineRow(row pgx.CollectableRow) (timelineRow, error) {
	var r timelineRow
	var seq int64
	err := row.Scan(&r.serverID, &r.k, &r.at, &r.status, &seq)
	return r, err
}

// SkillAvailability is the availability of a skill name over a window:
// available while one of the servers of tenant that declare it is.
func (s *Store) SkillAvailability(ctx context.Context, tenant uuid.UUID, name string, req registry.AvailabilityRequest) (registry.Availability, error) {
	now, err := s.availabilityNow(ctx, req)
	if err != nil {
		return registry.Availability{}, err
	}
	w, from, to := req.Bounds(now)
	rows, err := queryInTenant(ctx, s, tenant, collectTimelineRow, skillTimelinesSQL, tenant, name, from, to)
	if err != nil {
		return registry.Availability{}, err
	}
	var tls []registry.Timeline
	var last uuid.UUID
	for _, r := range rows {
		if len(tls) == 0 || r.serverID != last {
			tls = append(tls, registry.Timeline{})
			last = r.serverID
		}
		tl := &tls[len(tls)-1]
		switch {
		case r.k == 0 && r.status != nil:
			tl.Start = registry.Status(*r.status)
		case r.k == 1:
			tl.Changes = append(tl.Changes, registry.Change{At: r.at.UTC(), To: registry.Status(*r.status)})
		}
	}
	if len(tls) == 0 {
		return registry.Availability{}, registry.ErrSkillNotFound
	}
	return registry.SkillAvailability(w, from, to, tls), nil
}

// availabilityRatiosSQL computes the observed and available microseconds
// of each of the servers $2 over [$3, $4] in one statement: per server,
// the status before the window and its transitions in it, by the index of
// migration 0020. A server with no transition up to $4 has none observed.
const availabilityRatiosSQL = `
SELECT s.server_id,
       COALESCE(sum(seg.us), 0)::bigint,
       COALESCE(sum(seg.us) FILTER (WHERE seg.st IN ('healthy', 'degraded')), 0)::bigint
FROM mcp_servers s
LEFT JOIN LATERAL (
    SELECT ev.st, (extract(epoch FROM lead(ev.at, 1, $4) OVER (ORDER BY ev.at, ev.k, ev.seq) - ev.at) * 1000000)::bigint AS us
    FROM ((SELECT $3::timestamptz AS at, e.to_status AS st, 0 AS k, 0::bigint AS seq
           FROM mcp_audit_events e
           WHERE e.tenant_id = $1 AND e.server_id = s.server_id AND e.occurred_at < $3
           ORDER BY e.occurred_at DESC, e.position DESC LIMIT 1)
          UNION ALL
          SELECT e.occurred_at, e.to_status, 1, e.position
          FROM mcp_audit_events e
          WHERE e.tenant_id = $1 AND e.server_id = s.server_id AND e.occurred_at >= $3 AND e.occurred_at <= $4) ev
) seg ON true
WHERE s.tenant_id = $1 AND s.server_id = ANY ($2)
GROUP BY s.server_id`

type ratioRow struct {
	id                  uuid.UUID
	observed, available int64
}

func collectRatioRow(row pgx.CollectableRow) (ratioRow, error) {
	var r ratioRow
	err := row.Scan(&r.id, &r.observed, &r.available)
	return r, err
}

// AvailabilityRatios returns the available share of the window of each of
// tenant's servers among ids, in their order, in one statement.
func (s *Store) AvailabilityRatios(ctx context.Context, tenant uuid.UUID, ids []uuid.UUID, req registry.AvailabilityRequest) ([]registry.AvailabilityRatio, error) {
	out := []registry.AvailabilityRatio{}
	if len(ids) == 0 {
		return out, nil
	}
	now, err := s.availabilityNow(ctx, req)
	if err != nil {
		return nil, err
	}
	_, from, to := req.Bounds(now)
	rows, err := queryInTenant(ctx, s, tenant, collectRatioRow, availabilityRatiosSQL, tenant, ids, from, to)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]ratioRow, len(rows))
	for _, r := range rows {
		byID[r.id] = r
	}
	for _, id := range ids {
		r, ok := byID[id]
		if !ok {
			continue
		}
		delete(byID, id) // an id listed twice answers once
		out = append(out, registry.AvailabilityRatio{ServerID: id, ObservedSeconds: registry.Seconds(r.observed), AvailableRatio: registry.Ratio(r.available, r.observed)})
	}
	return out, nil
}
