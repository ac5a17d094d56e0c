package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/registry"
)

// SweepResult is the timing of several sweeps of one case.
type SweepResult struct {
	Servers int64 `json:"servers"`
	// Due is how many transitions each sweep applied.
	Due    int             `json:"transitions_per_sweep"`
	Runs   []time.Duration `json:"runs_ns"`
	Median time.Duration   `json:"median_ns"`
	Min    time.Duration   `json:"min_ns"`
	Max    time.Duration   `json:"max_ns"`
}

func (r *SweepResult) summarize() {
	s := slices.Clone(r.Runs)
	slices.Sort(s)
	r.Min, r.Max, r.Median = s[0], s[len(s)-1], s[len(s)/2]
}

// The sweep's thresholds at the default 10 s interval.
var (
	degradedAfter  = registry.DegradedAfter(registry.DefaultHeartbeatInterval)
	unhealthyAfter = registry.UnhealthyAfter(registry.DefaultHeartbeatInterval)
)

// sweepSQL is the monitor's statement, as pgstore sends it.
const sweepSQL = `SELECT * FROM mcp_sweep($1::timestamptz, $2::bigint * interval '1 microsecond',
	$3::bigint * interval '1 microsecond', $4)`

// sweepOnce runs one sweep at now through app, fetching every row as the
// monitor does, and returns its round trip (commit included) and the count
// of transitions.
func sweepOnce(ctx context.Context, app *pgxpool.Pool, now time.Time, limit int) (time.Duration, int, error) {
	t0 := time.Now()
	rows, err := app.Query(ctx, sweepSQL, now, degradedAfter.Microseconds(), unhealthyAfter.Microseconds(), limit)
	if err != nil {
		return 0, 0, fmt.Errorf("sweep: %w", err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("sweep: %w", err)
	}
	return time.Since(t0), n, nil
}

// SweepNothingDue times runs sweeps at at+1s of a fleet that last
// heartbeated at at (or later): nothing is due.
func SweepNothingDue(ctx context.Context, admin, app *pgxpool.Pool, at time.Time, runs int) (SweepResult, error) {
	var res SweepResult
	var err error
	if res.Servers, err = serverCount(ctx, admin); err != nil {
		return res, err
	}
	for range runs {
		d, n, err := sweepOnce(ctx, app, at.Add(time.Second), lifecycle.DefaultSweepBatch)
		if err != nil {
			return res, err
		}
		if n != 0 {
			return res, fmt.Errorf("sweep with nothing due applied %d transitions", n)
		}
		res.Runs = append(res.Runs, d)
	}
	res.summarize()
	return res, nil
}

// SweepDue times runs sweeps at at+1s in which due servers of the main fleet
// (every total/due-th of servers 1..total) are 36 s silent, so each sweep
// moves them to unhealthy, takes their skills away and audits each: due
// transitions. Before each run, outside the timing, those servers are put
// back to healthy with their skills available. The fleet is left healthy.
func SweepDue(ctx context.Context, admin, app *pgxpool.Pool, at time.Time, total, due, runs int) (SweepResult, error) {
	var res SweepResult
	var err error
	if res.Servers, err = serverCount(ctx, admin); err != nil {
		return res, err
	}
	every := total / due
	for range runs {
		if err := makeDue(ctx, admin, at.Add(-35*time.Second), every, total); err != nil {
			return res, err
		}
		d, n, err := sweepOnce(ctx, app, at.Add(time.Second), max(lifecycle.DefaultSweepBatch, due))
		if err != nil {
			return res, err
		}
		if n != due {
			return res, fmt.Errorf("sweep applied %d transitions, want %d", n, due)
		}
		res.Due = n
		res.Runs = append(res.Runs, d)
	}
	res.summarize()
	return res, makeDue(ctx, admin, at, every, total)
}

// makeDue sets every every-th server of 1..total healthy, last heartbeating
// at at, with its skills available.
func makeDue(ctx context.Context, admin *pgxpool.Pool, at time.Time, every, total int) error {
	_, err := admin.Exec(ctx, `
WITH due AS (
    SELECT md5('server' || n)::uuid AS server_id FROM generate_series($2::int, $3::int, $2::int) n
), srv AS (
    UPDATE mcp_servers s SET status = 'healthy', last_heartbeat_at = $1
    FROM due WHERE s.server_id = due.server_id
)
UPDATE mcp_skills k SET available = true, unavailable_reason = NULL
FROM due WHERE k.server_id = due.server_id AND NOT k.available`, at, every, total)
	if err != nil {
		return fmt.Errorf("make servers due: %w", err)
	}
	return nil
}
