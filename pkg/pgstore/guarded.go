package pgstore

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/registry"
)

var _ lifecycle.MonitorStore = (*Store)(nil)

// Sweep applies at most req.Limit of the transitions due at req.Now across
// every tenant: through mcp_sweep, or with req.BlindAfter set through
// mcp_sweep_guarded, behind the blind-window rule; one round trip. Of
// several replicas sweeping guarded at once, one sweeps and the others get
// an empty result.
func (s *Store) Sweep(ctx context.Context, req registry.SweepRequest) (registry.SweepResult, error) {
	at := s.now()
	if !req.Now.IsZero() {
		t := req.Now.UTC().Truncate(time.Microsecond)
		at = &t
	}
	if req.BlindAfter <= 0 {
		evs, err := s.sweepUnguarded(ctx, at, req.Interval, req.Limit)
		return registry.SweepResult{Events: evs}, err
	}
	rows, err := s.pool.Query(ctx, `
SELECT event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at, body,
       blind_from, blind_until, blind_new
FROM mcp_sweep_guarded($1::timestamptz, $2::bigint * interval '1 microsecond', $3::bigint * interval '1 microsecond',
                       $4, $5::bigint * interval '1 microsecond')`,
		at, registry.DegradedAfter(req.Interval).Microseconds(), registry.UnhealthyAfter(req.Interval).Microseconds(),
		req.Limit, req.BlindAfter.Microseconds())
	if err != nil {
		return registry.SweepResult{}, translate(err)
	}
	defer rows.Close()
	var res registry.SweepResult
	for rows.Next() {
		var (
			r                     eventRow
			blindFrom, blindUntil *time.Time
			blindNew              bool
		)
		if err := rows.Scan(append(r.appendDestNoSeq(make([]any, 0, 13)), &blindFrom, &blindUntil, &blindNew)...); err != nil {
			return registry.SweepResult{}, translate(err)
		}
		if blindNew && res.Opened == nil && blindFrom != nil && blindUntil != nil {
			res.Opened = &registry.BlindWindow{From: blindFrom.UTC(), Until: blindUntil.UTC()}
		}
		ev, ok, err := r.event()
		if err != nil {
			return registry.SweepResult{}, err
		}
		if ok {
			res.Events = append(res.Events, ev)
		}
	}
	if err := rows.Err(); err != nil {
		return registry.SweepResult{}, translate(err)
	}
	return res, nil
}

// LiveCounts counts the given tenants' servers that are not deregistered.
func (s *Store) LiveCounts(ctx context.Context, tenants []uuid.UUID) (map[uuid.UUID]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT tenant_id, live FROM mcp_live_counts($1)`, tenants)
	if err != nil {
		return nil, translate(err)
	}
	out := make(map[uuid.UUID]int64, len(tenants))
	var (
		tenant uuid.UUID
		n      int64
	)
	_, err = pgx.ForEachRow(rows, []any{&tenant, &n}, func() error {
		out[tenant] = n
		return nil
	})
	return out, translate(err)
}
