package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// PgbenchResult is one pgbench run of the heartbeat baseline.
type PgbenchResult struct {
	Clients int     `json:"clients"`
	TPS     float64 `json:"tps"`
	// LatencyAvg is pgbench's average latency; P50 and P99 are read from
	// its per-transaction log.
	LatencyAvg time.Duration `json:"latency_avg_ns"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	// HOTShare is the share of the run's updates of mcp_servers that were
	// HOT (heap-only: no new index entries).
	HOTShare float64 `json:"hot_share"`
	// CPU is what PostgreSQL and the rest of the machine (pgbench among
	// them) used during the run.
	CPU    CPUUse `json:"cpu"`
	Output string `json:"-"`
}

// pgbenchScript is one heartbeat per transaction: one row by primary key.
const pgbenchScript = `\set n random(1, %d)
UPDATE mcp_servers SET last_heartbeat_at = now() WHERE server_id = md5('server' || :n)::uuid;
`

var (
	tpsRe     = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	latencyRe = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
)

// Pgbench runs pgbench's one-row-per-transaction heartbeat update of the
// servers 1..servers with clients for d, prepared statements, as the
// superuser, and reads the share of HOT updates from the statistics.
func Pgbench(ctx context.Context, pg *pgtest.Cluster, admin *pgxpool.Pool, dir string, servers, clients int, d time.Duration) (PgbenchResult, error) {
	return PgbenchRun(ctx, pg, admin, dir, PgbenchOptions{Servers: servers, Clients: clients, Duration: d})
}

// PgbenchOptions is one pgbench run of the heartbeat baseline.
type PgbenchOptions struct {
	// Servers are the seeded servers 1..Servers it updates.
	Servers int
	Clients int
	// Rate, when positive, is pgbench's -R: transactions started on a
	// schedule of that many per second, whatever their latency.
	Rate     int
	Duration time.Duration
}

// PgbenchRun runs pgbench as Pgbench does, at o.Rate when it is set.
func PgbenchRun(ctx context.Context, pg *pgtest.Cluster, admin *pgxpool.Pool, dir string, o PgbenchOptions) (PgbenchResult, error) {
	servers, clients, d := o.Servers, o.Clients, o.Duration
	bin, err := findPgbench(pg)
	if err != nil {
		return PgbenchResult{}, fmt.Errorf("pgbench not found (it ships with the PostgreSQL server package): %w", err)
	}
	script := filepath.Join(dir, "heartbeat.pgbench")
	if err := os.WriteFile(script, fmt.Appendf(nil, pgbenchScript, servers), 0o644); err != nil {
		return PgbenchResult{}, err
	}
	before, err := updateCounts(ctx, admin)
	if err != nil {
		return PgbenchResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	logPrefix := filepath.Join(dir, fmt.Sprintf("pgbench-%d-%d-log", clients, o.Rate))
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "postgres",
		"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 2)),
		"-T", strconv.Itoa(int(d.Seconds())), "-l", "--log-prefix", logPrefix, "-f", script}
	if o.Rate > 0 {
		args = append(args, "-R", strconv.Itoa(o.Rate))
	}
	cmd := exec.CommandContext(ctx, bin, append(args, Database)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	res := PgbenchResult{Clients: clients, Output: string(out)}
	if err != nil {
		return res, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := tpsRe.FindSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("pgbench: no tps in its output:\n%s", out)
	}
	res.TPS, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := latencyRe.FindSubmatch(out); m != nil {
		ms, _ := strconv.ParseFloat(string(m[1]), 64)
		res.LatencyAvg = time.Duration(ms * float64(time.Millisecond))
	}
	if lat, err := pgbenchLatencies(logPrefix); err == nil && len(lat) > 0 {
		res.P50, res.P99 = Quantile(lat, 0.50), Quantile(lat, 0.99)
	}
	after, err := updateCounts(ctx, admin)
	if err != nil {
		return res, err
	}
	res.HOTShare = after.hotShareSince(before)
	return res, nil
}

// tableUpdates are the update counters of mcp_servers.
type tableUpdates struct{ upd, hot int64 }

func (a tableUpdates) hotShareSince(b tableUpdates) float64 {
	if a.upd <= b.upd {
		return 0
	}
	return float64(a.hot-b.hot) / float64(a.upd-b.upd)
}

// updateCounts reads mcp_servers' update counters, after the statistics of
// sessions just ended have been flushed (they are, within a second).
func updateCounts(ctx context.Context, admin *pgxpool.Pool) (tableUpdates, error) {
	select {
	case <-time.After(1500 * time.Millisecond):
	case <-ctx.Done():
		return tableUpdates{}, ctx.Err()
	}
	var u tableUpdates
	err := admin.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'mcp_servers'`).
		Scan(&u.upd, &u.hot)
	if err != nil {
		return u, fmt.Errorf("read update statistics: %w", err)
	}
	return u, nil
}

// pgbenchLatencies reads the per-transaction logs pgbench wrote with -l
// under prefix (a file per thread) and returns the latencies, sorted. A log
// line is "client transaction latency_us script epoch_s epoch_us".
func pgbenchLatencies(prefix string) ([]time.Duration, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for line := range strings.Lines(string(data)) {
			fields := strings.Fields(line)
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				continue
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
		_ = os.Remove(f)
	}
	slices.Sort(lat)
	return lat, nil
}
