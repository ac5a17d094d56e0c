package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/pgsession"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// Config is what one run measures, and how long each measure may take.
type Config struct {
	// Tenants x Modules servers are seeded (two skills each) and
	// heartbeated: 1,000 x 100 by default.
	Tenants int `json:"tenants"`
	Modules int `json:"modules"`
	// BigTenant is the size of the extra tenant that the paging measure
	// walks; 0 skips it.
	BigTenant int `json:"big_tenant"`
	// LargeTenants x Modules servers is the fleet of the large sweep
	// (10,000 x 100 = 1,000,000 by default); 0 skips it.
	LargeTenants int `json:"large_tenants"`
	// Clients is the concurrency of the closed loops: mcpd's and etcd's.
	Clients int `json:"clients"`
	// Duration bounds each closed loop; OpenDuration the open loop;
	// PgbenchDuration each pgbench run; ListDuration each list measure.
	Duration        time.Duration `json:"duration_ns"`
	OpenDuration    time.Duration `json:"open_duration_ns"`
	PgbenchDuration time.Duration `json:"pgbench_duration_ns"`
	ListDuration    time.Duration `json:"list_duration_ns"`
	// PgbenchClients are the client counts of the pgbench baseline.
	PgbenchClients []int `json:"pgbench_clients"`
	// SweepRuns is how many sweeps each sweep case times (the median is
	// reported).
	SweepRuns int `json:"sweep_runs"`
	// DevServers: whether to measure mcpd --dev holding Tenants x Modules
	// servers registered through the API.
	DevServers bool `json:"dev_servers"`
	// MCPD is the mcpd binary; empty: built from the module into the work
	// directory.
	MCPD string `json:"mcpd"`
	// Go is the go command that builds mcpd.
	Go string `json:"-"`
	// Etcd is the etcd binary; empty: etcd on PATH, skipped when there is
	// none.
	Etcd string `json:"etcd"`
	// EtcdLeases is how many leases the etcd baseline keeps alive.
	EtcdLeases int `json:"etcd_leases"`
	// ProfileDir receives the CPU and allocation profiles of an in-process
	// heartbeat load of ProfileDuration; empty skips it.
	ProfileDir      string        `json:"profile_dir"`
	ProfileDuration time.Duration `json:"profile_duration_ns"`
	// WorkDir is where the temporary directory (cluster, logs) is made; it
	// must be on a real disk. Empty: the temporary directory.
	WorkDir string `json:"work_dir"`
	// Keep leaves the temporary directory behind.
	Keep bool `json:"-"`
	// MaxCalls bounds the calls of any one load.
	MaxCalls int64 `json:"max_calls"`
	// Watchers are the sizes of the change feed's watcher loads; empty
	// skips them.
	Watchers []int `json:"watchers"`
	// Fleet are the sizes of the fleet loads (each server its own
	// connection, heartbeating every 10 s); empty skips them.
	// FleetDuration bounds each.
	Fleet         []int         `json:"fleet"`
	FleetDuration time.Duration `json:"fleet_duration_ns"`
	// FleetTLS are the sizes of the fleet loads over TLS, each followed by
	// a round of reconnections and one of mcpd restarted; empty skips them.
	FleetTLS []int `json:"fleet_tls"`
	// Tracing measures the heartbeat loop with tracing off, on at 100 %
	// and on at 1 % sampling, spans sent to a receiver in this process.
	Tracing bool `json:"tracing"`
	// Anchors: with the fleet loads, the same fleet against a plain
	// net/http server and pgbench at the fleets' rates (anchor.go).
	Anchors bool `json:"anchors"`
	// CitusServers is the fleet of the Citus row set (citus.go): the same
	// store load on plain PostgreSQL and on a 3-node Citus cluster when
	// Citus is installed; 0 skips it. CitusDuration bounds each of its
	// heartbeat loads; CitusOnly runs that row set alone. CitusTenants
	// share the fleet, round robin.
	CitusServers  int           `json:"citus_servers"`
	CitusTenants  int           `json:"citus_tenants"`
	CitusDuration time.Duration `json:"citus_duration_ns"`
	CitusOnly     bool          `json:"citus_only"`
}

// DefaultConfig is the full run of make bench.
func DefaultConfig() Config {
	return Config{
		Tenants: 1000, Modules: 100, BigTenant: 10000, LargeTenants: 10000,
		Clients: 64, Duration: 15 * time.Second, OpenDuration: 10 * time.Second,
		PgbenchDuration: 10 * time.Second, ListDuration: 5 * time.Second,
		PgbenchClients: []int{8, 32}, SweepRuns: 7, DevServers: true,
		Go: "go", EtcdLeases: 1000, ProfileDuration: 10 * time.Second, MaxCalls: 5_000_000,
		Watchers: []int{1000, 10000},
		Fleet:    []int{1000, 10000, 30000}, FleetDuration: 30 * time.Second,
		FleetTLS:     []int{10000},
		Tracing:      true,
		Anchors:      true,
		CitusServers: 2000, CitusTenants: 20, CitusDuration: 15 * time.Second,
	}
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	var errs []error
	if c.Tenants < 1 || c.Modules < 1 {
		errs = append(errs, errors.New("-tenants and -modules must be at least 1"))
	}
	if c.Modules > 10000 {
		errs = append(errs, errors.New("-modules must be at most 10,000"))
	}
	if c.LargeTenants != 0 && c.LargeTenants <= c.Tenants {
		errs = append(errs, errors.New("-large-tenants must be 0 or more than -tenants"))
	}
	if c.Clients < 1 {
		errs = append(errs, errors.New("-clients must be at least 1"))
	}
	if c.SweepRuns < 1 {
		errs = append(errs, errors.New("-sweep-runs must be at least 1"))
	}
	for _, d := range []time.Duration{c.Duration, c.OpenDuration, c.PgbenchDuration, c.ListDuration} {
		if d <= 0 || d > 5*time.Minute {
			errs = append(errs, fmt.Errorf("durations must be in (0, 5m]: %v", d))
		}
	}
	if len(c.Fleet)+len(c.FleetTLS) > 0 && (c.FleetDuration < fleetInterval || c.FleetDuration > 5*time.Minute) {
		errs = append(errs, fmt.Errorf("-fleet-duration must be in [%v, 5m]: %v", fleetInterval, c.FleetDuration))
	}
	if c.PgbenchDuration < time.Second {
		errs = append(errs, errors.New("-pgbench-duration must be at least 1s (pgbench counts whole seconds)"))
	}
	if c.CitusServers < 0 || c.CitusServers > 100000 {
		errs = append(errs, errors.New("-citus-servers must be in [0, 100,000]"))
	}
	if c.CitusServers > 0 && (c.CitusTenants < 1 || c.CitusTenants > c.CitusServers) {
		errs = append(errs, fmt.Errorf("-citus-tenants must be in [1, -citus-servers]: %d", c.CitusTenants))
	}
	if c.CitusServers > 0 && (c.CitusDuration <= 0 || c.CitusDuration > time.Minute) {
		// A server heartbeats at least once a load: none may fall due
		// within the sweep's 60 s, or a true transition would count as false.
		errs = append(errs, fmt.Errorf("-citus-duration must be in (0, 1m]: %v", c.CitusDuration))
	}
	if c.CitusOnly && c.CitusServers == 0 {
		errs = append(errs, errors.New("-citus-only needs -citus-servers above 0"))
	}
	if c.MaxCalls < 1 {
		errs = append(errs, errors.New("-max-calls must be at least 1"))
	}
	return errors.Join(errs...)
}

// Targets: the (docs/performance.md, "Targets"), except the
// heartbeat rate, which is what the fleet needs at the default interval.
// The memory targets are in MB (10^6 bytes), as the issue gives them.
const (
	targetOpenP99    = 10 * time.Millisecond
	targetClosedP999 = 20 * time.Millisecond
	targetSweepNone  = 5 * time.Millisecond  // 100,000 servers, nothing due
	targetSweep      = 50 * time.Millisecond // 1 % due; or 1,000,000 servers, nothing due
	targetListP99    = 5 * time.Millisecond
	targetVsPgbench  = 3 // issue 31 (issue 24: 2)
	targetRSSMiB     = 150e6 / (1 << 20)
	targetDevRSSMiB  = 200e6 / (1 << 20)
)

// Bounds and sizes of the measures.
const (
	mcpdShutdown       = 20 * time.Second       // SIGTERM to exit
	loadDrain          = 10 * time.Second       // the open loop's calls still running at its end
	sweepDuePercent    = 100                    // 1 % of the fleet is due
	rssSamplePeriod    = 500 * time.Millisecond // VmRSS during the closed loop
	seedTimeout        = 10 * time.Minute       // one seeding statement
	defaultIntervalSec = 10                     // the fleet's interval, for the rate it needs
)

// mcpdHeartbeatInterval is the interval mcpd runs with during the loads:
// long, so that no seeded server falls due while the load is spread over
// the fleet; the monitor still sweeps every 5 s, finding nothing.
const mcpdHeartbeatInterval = 10 * time.Minute

// Run does every measure of cfg and returns the report. Progress goes to
// logger. A measure that fails is reported as an error row and the run goes
// on; only a failure to start PostgreSQL or seed it ends it.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{StartedAt: time.Now().UTC(), Machine: readMachine(), Config: cfg, Details: map[string]any{}}
	base := cfg.WorkDir
	if base == "" {
		base = os.TempDir()
	}
	work, err := os.MkdirTemp(base, "mcpd-bench-")
	if err != nil {
		return nil, err
	}
	// Others may pass through (PostgreSQL runs as nobody under root) but
	// not list it; the secret in it is 0600.
	if err := os.Chmod(work, 0o711); err != nil {
		return nil, err
	}
	if cfg.Keep {
		logger.Info("work directory kept", "dir", work)
	} else {
		defer func() { _ = os.RemoveAll(work) }()
	}
	r := &runner{cfg: cfg, log: logger, rep: rep, work: work}
	defer r.close()
	err = r.run(ctx)
	rep.Machine.LoadEnd = loadavg()
	rep.Duration = time.Since(rep.StartedAt)
	return rep, err
}

type runner struct {
	cfg  Config
	log  *slog.Logger
	rep  *Report
	work string

	pg         *pgtest.Cluster
	admin, app *pgxpool.Pool
	appURL     string
	secretFile string
	secret     []byte
	mcpdBin    string
	seededAt   time.Time
}

func (r *runner) close() {
	if r.app != nil {
		r.app.Close()
	}
	if r.admin != nil {
		r.admin.Close()
	}
	if r.pg != nil {
		r.keepPostgresLog()
		if err := r.pg.Destroy(); err != nil {
			r.log.Warn("stop PostgreSQL", "err", err)
		}
	}
}

// keepPostgresLog copies PostgreSQL's log (checkpoints and autovacuum runs
// included) into the kept work directory before the cluster's directory
// goes.
func (r *runner) keepPostgresLog() {
	if !r.cfg.Keep || r.pg == nil {
		return
	}
	data, err := os.ReadFile(filepath.Join(r.pg.Dir(), "postgres.log"))
	if err == nil {
		err = os.WriteFile(filepath.Join(r.work, "postgres.log"), data, 0o644)
	}
	if err != nil {
		r.log.Warn("keep PostgreSQL's log", "err", err)
	}
}

func (r *runner) servers() int { return r.cfg.Tenants * r.cfg.Modules }

func (r *runner) run(ctx context.Context) error {
	if r.cfg.CitusOnly {
		r.citusRows(ctx)
		return ctx.Err()
	}
	if err := r.startDatabase(ctx); err != nil {
		return err
	}
	r.pgbench(ctx)
	r.sweeps(ctx)
	if r.cfg.BigTenant > 0 {
		r.log.Info("seeding the big tenant", "servers", r.cfg.BigTenant)
		sctx, cancel := context.WithTimeout(ctx, seedTimeout)
		err := SeedBigTenant(sctx, r.admin, r.cfg.BigTenant, r.seededAt)
		cancel()
		if err != nil {
			return err
		}
	}
	r.mcpd(ctx)
	r.etcd(ctx) // right after mcpd's loads, so that the machine is as alike as it can be
	r.tracingCost(ctx)
	r.anchors(ctx)
	r.fleet(ctx)
	r.profile(ctx)
	r.watchers(ctx)
	r.largeSweep(ctx)
	r.dev(ctx)
	r.citusRows(ctx)
	return ctx.Err()
}

func (r *runner) startDatabase(ctx context.Context) error {
	r.log.Info("starting PostgreSQL (durable defaults: fsync, synchronous_commit and full_page_writes on)")
	pg, err := StartPostgres(r.work)
	if err != nil {
		return err
	}
	r.pg = pg
	r.rep.Machine.PostgreSQL = pg.ServerVersion()
	r.rep.Machine.DataFS = pg.FSType()
	if r.rep.Machine.DataFS == "tmpfs" {
		r.log.Warn("the cluster's data directory is on tmpfs: fsync costs nothing there and the figures are not durable ones; give -work-dir on a disk")
	}
	if err := SetUp(ctx, pg); err != nil {
		return err
	}
	if r.admin, err = newPool(ctx, pg.URL("postgres", Database), 8); err != nil {
		return err
	}
	r.appURL = pg.URL(AppRole, Database)
	if r.app, err = newPool(ctx, r.appURL, 4); err != nil {
		return err
	}
	var settings [3]string
	if err := r.admin.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('full_page_writes')`).Scan(&settings[0], &settings[1], &settings[2]); err != nil {
		return err
	}
	r.rep.Details["postgres_settings"] = map[string]string{"fsync": settings[0], "synchronous_commit": settings[1],
		"full_page_writes": settings[2]}
	if settings != [3]string{"on", "on", "on"} {
		return fmt.Errorf("the cluster is not durable: fsync %s, synchronous_commit %s, full_page_writes %s",
			settings[0], settings[1], settings[2])
	}
	r.seededAt = time.Now().UTC().Truncate(time.Second)
	r.log.Info("seeding", "tenants", r.cfg.Tenants, "modules", r.cfg.Modules, "servers", r.servers())
	sctx, cancel := context.WithTimeout(ctx, seedTimeout)
	defer cancel()
	t0 := time.Now()
	if err := SeedServers(sctx, r.admin, 1, r.cfg.Tenants, r.cfg.Modules, r.seededAt, true); err != nil {
		return err
	}
	r.rep.Details["seed_seconds"] = time.Since(t0).Seconds()
	if r.secretFile, r.secret, err = WriteSecret(r.work); err != nil {
		return err
	}
	return nil
}

func newPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	cfg.AfterConnect = pgsession.AfterConnect(cfg.AfterConnect) // as pgstore.Connect
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// a. pgbench: one row by primary key per transaction.
func (r *runner) pgbench(ctx context.Context) {
	var results []PgbenchResult
	for _, clients := range r.cfg.PgbenchClients {
		id := "pgbench_" + strconv.Itoa(clients)
		measure := fmt.Sprintf("a. pgbench 1-row heartbeat UPDATE/commit, %d clients", clients)
		r.log.Info("pgbench", "clients", clients, "duration", r.cfg.PgbenchDuration)
		cpu0 := TakeCPUSnapshot(0, r.pg.PID())
		res, err := Pgbench(ctx, r.pg, r.admin, r.work, r.servers(), clients, r.cfg.PgbenchDuration)
		cpu := TakeCPUSnapshot(0, r.pg.PID()).Since(cpu0)
		if err != nil {
			r.rep.fail(id, measure, err)
			continue
		}
		res.CPU = cpu
		results = append(results, res)
		pgPerTx := cpu.Postgres / res.TPS * 1e6
		r.rep.add(Row{ID: id, Measure: measure, Value: res.TPS, Unit: unitPerSecond,
			Note: fmt.Sprintf("HOT %.0f %%, avg latency %.2f ms; PostgreSQL CPU %.0f µs per transaction; %s (driver: pgbench)",
				100*res.HOTShare, millis(res.LatencyAvg), pgPerTx, cpu.Describe(""))})
		if res.P99 > 0 {
			r.rep.add(Row{ID: id + "_p99", Measure: fmt.Sprintf("a. pgbench latency p99, %d clients (closed loop)", clients),
				Value: millis(res.P99), Unit: unitMillis,
				Note: fmt.Sprintf("p50 %.2f ms: the durable commit's own tail on this disk", millis(res.P50))})
		}
	}
	r.rep.Details["pgbench"] = results
}

// d. the sweep at Tenants x Modules: nothing due, then 1 % due.
func (r *runner) sweeps(ctx context.Context) {
	r.log.Info("sweep timings", "servers", r.servers(), "runs", r.cfg.SweepRuns)
	if err := ResetFleet(ctx, r.admin, r.seededAt); err != nil {
		r.rep.fail("sweep_none", "d. sweep, nothing due", err)
		return
	}
	n := r.servers()
	none, err := SweepNothingDue(ctx, r.admin, r.app, r.seededAt, r.cfg.SweepRuns)
	if err != nil {
		r.rep.fail("sweep_none", "d. sweep, nothing due", err)
	} else {
		r.rep.add(Row{ID: "sweep_none", Measure: fmt.Sprintf("d. sweep, %s servers, nothing due (median)", groupThousands(float64(none.Servers))),
			Value: millis(none.Median), Unit: unitMillis, Target: millis(targetSweepNone), Direction: AtMost})
		r.rep.Details["sweep_none"] = none
	}
	due := max(n/sweepDuePercent, 1)
	pct, err := SweepDue(ctx, r.admin, r.app, r.seededAt, n, due, r.cfg.SweepRuns)
	if err != nil {
		r.rep.fail("sweep_1pct", "d. sweep, 1 % due", err)
	} else {
		r.rep.add(Row{ID: "sweep_1pct", Measure: fmt.Sprintf("d. sweep, %s servers, 1 %% due: %s to unhealthy + cascade + audit (median)",
			groupThousands(float64(pct.Servers)), groupThousands(float64(pct.Due))),
			Value: millis(pct.Median), Unit: unitMillis, Target: millis(targetSweep), Direction: AtMost})
		r.rep.Details["sweep_1pct"] = pct
	}
}

// startTailProbe starts gathering the evidence of a load's tail on m.
func (r *runner) startTailProbe(m *MCPD) *tailProbe {
	return startTailProbe(m, filepath.Join(r.pg.Dir(), "postgres.log"), r.pg.Dir(), r.pg.PID(), pgWaits(r.admin))
}

// ensureMCPD sets r.mcpdBin: -mcpd's binary, or one built in the work
// directory.
func (r *runner) ensureMCPD(ctx context.Context) error {
	if r.mcpdBin == "" {
		r.mcpdBin = r.cfg.MCPD
	}
	if r.mcpdBin != "" {
		return nil
	}
	r.log.Info("building mcpd")
	bin, err := BuildMCPD(ctx, r.cfg.Go, r.work)
	if err != nil {
		return err
	}
	r.mcpdBin = bin
	return nil
}

// b, e, f: the real mcpd binary over PostgreSQL.
func (r *runner) mcpd(ctx context.Context) {
	if err := r.ensureMCPD(ctx); err != nil {
		r.rep.fail("e2e", "b. mcpd heartbeats", err)
		return
	}
	m, err := StartMCPD(ctx, r.mcpdBin, r.work, "mcpd", "--database-url", r.appURL,
		"--auth-jwt-secret-file", r.secretFile, "--heartbeat-interval", mcpdHeartbeatInterval.String())
	if err != nil {
		r.rep.fail("e2e", "b. mcpd heartbeats", err)
		return
	}
	defer func() {
		if err := m.Stop(mcpdShutdown); err != nil {
			r.log.Warn("stop mcpd", "err", err)
		}
	}()
	fleet, err := NewFleet(m.URL, r.secret, r.cfg.Tenants, r.cfg.Modules)
	if err != nil {
		r.rep.fail("e2e", "b. mcpd heartbeats", err)
		return
	}
	defer fleet.Close()
	idle, _ := ReadMemory(m.PID())

	// Warm up: connections, statement caches, and what mcpd knows. A
	// server counts as known (healthy) to mcpd only after a heartbeat of it
	// went to the store through this mcpd, once the change feed followed
	// its tenant (the first heartbeat of a tenant makes it follow): one
	// pass over every seeded server, then a second second-long loop, after
	// which every heartbeat of the measured loop is held in memory.
	r.log.Info("warm-up: a heartbeat of every seeded server, so that mcpd knows them", "servers", r.servers())
	warm := ClosedLoop(ctx, r.cfg.Clients, 2*time.Minute, min(int64(r.servers()), r.cfg.MaxCalls), fleet.Heartbeat)
	r.rep.Details["e2e_warmup"] = warm
	ClosedLoop(ctx, r.cfg.Clients, time.Second, r.cfg.MaxCalls, fleet.Heartbeat)

	r.log.Info("closed-loop heartbeats through mcpd", "clients", r.cfg.Clients, "duration", r.cfg.Duration)
	before, _ := updateCounts(ctx, r.admin)
	sampler := startRSSSampler(m.PID())
	probe := r.startTailProbe(m)
	wal0, walErr := ReadWAL(ctx, r.admin)
	flush0, flushErr := ReadFlushMetrics(ctx, m.Client, m.URL)
	cpu0 := TakeCPUSnapshot(m.PID(), r.pg.PID())
	closed := ClosedLoop(ctx, r.cfg.Clients, r.cfg.Duration, r.cfg.MaxCalls, fleet.Heartbeat)
	cpu := TakeCPUSnapshot(m.PID(), r.pg.PID()).Since(cpu0)
	var flush FlushMetrics
	if flushErr == nil {
		// The flush under way at the loop's end commits within a window.
		time.Sleep(2 * mcpdFlushInterval)
		var f1 FlushMetrics
		if f1, flushErr = ReadFlushMetrics(ctx, m.Client, m.URL); flushErr == nil {
			flush = f1.Since(flush0)
			r.rep.Details["e2e_closed_flush"] = flush
		}
	}
	var wal WAL
	if walErr == nil {
		var w1 WAL
		if w1, walErr = ReadWAL(ctx, r.admin); walErr == nil {
			wal = w1.Since(wal0)
			r.rep.Details["e2e_closed_wal"] = wal
		}
	}
	r.rep.Details["e2e_closed_tail"] = probe.finish(closed)
	peak := sampler.stop()
	r.rep.Details["e2e_closed_cpu"] = cpu
	after, _ := updateCounts(ctx, r.admin)
	r.rep.Details["e2e_closed"] = closed
	r.rep.Details["e2e_hot_share"] = after.hotShareSince(before)
	mem, memErr := ReadMemory(m.PID())
	if closed.Throughput == 0 {
		r.rep.fail("e2e", "b. mcpd heartbeats", fmt.Errorf("no heartbeat succeeded: %s", closed.FirstError))
		return
	}
	note := fmt.Sprintf("%d errors; HOT %.0f %%; %s", closed.Errors, 100*after.hotShareSince(before), cpu.Describe("mcpd"))
	if closed.FirstError != "" {
		note += "; first error: " + closed.FirstError
	}
	fleetNeed := float64(r.servers()) / defaultIntervalSec
	r.rep.add(Row{ID: "e2e", Measure: fmt.Sprintf("b. mcpd heartbeats/s, closed loop, %d clients, %s servers", r.cfg.Clients,
		groupThousands(float64(r.servers()))), Value: closed.Throughput, Unit: unitPerSecond,
		Target: fleetNeed, Direction: AtLeast, Note: note + "; target: the fleet at the 10 s interval"})
	mcpdUS, pgUS := cpu.PerCall(closed.Calls, closed.Elapsed)
	r.rep.add(Row{ID: "e2e_cpu_mcpd", Measure: "b. mcpd CPU per heartbeat (HTTP, JWT, JSON, log, pgx)", Value: mcpdUS, Unit: unitMicros,
		Note: "CPU time, not wall time: robust to a busy machine"})
	r.rep.add(Row{ID: "e2e_cpu_pg", Measure: "b. PostgreSQL CPU per heartbeat (spread over tenants)", Value: pgUS, Unit: unitMicros})
	if walErr == nil && closed.Calls > 0 {
		calls := float64(closed.Calls)
		r.rep.add(Row{ID: "e2e_wal", Measure: "b. WAL bytes per heartbeat, closed loop (batched)", Value: float64(wal.LSN) / calls, Unit: unitBytes,
			Note: fmt.Sprintf("from the WAL insert position; pg_stat_wal: %.0f bytes, %.2f records and %.3f full-page images per heartbeat",
				wal.Bytes/calls, float64(wal.Records)/calls, float64(wal.FPI)/calls)})
	}
	r.rep.add(Row{ID: "e2e_p50", Measure: "b. mcpd heartbeat p50, closed loop", Value: millis(closed.P50), Unit: unitMillis})
	r.rep.add(Row{ID: "e2e_p99", Measure: "b. mcpd heartbeat p99, closed loop", Value: millis(closed.P99), Unit: unitMillis})
	r.rep.add(Row{ID: "e2e_p999", Measure: "b. mcpd heartbeat p99.9, closed loop", Value: millis(closed.P999), Unit: unitMillis,
		Target: millis(targetClosedP999), Direction: AtMost, Note: fmt.Sprintf("max %.2f ms", millis(closed.Max))})
	if flushErr != nil {
		r.rep.fail("e2e_flush", "b. mcpd closed loop: the flush window", flushErr)
	} else {
		r.flushRows("e2e", "b. mcpd closed loop", flush, closed.Calls)
	}
	if pgb, ok := r.rep.Details["pgbench"].([]PgbenchResult); ok && len(pgb) > 0 {
		best := pgb[0]
		for _, p := range pgb {
			if p.TPS > best.TPS {
				best = p
			}
		}
		r.rep.add(Row{ID: "e2e_vs_pgbench", Measure: fmt.Sprintf("b. mcpd ÷ pgbench best (%d clients)", best.Clients),
			Value: closed.Throughput / best.TPS, Unit: unitRatio, Target: targetVsPgbench, Direction: AtLeast, Basis: BasisWall,
			Note: "heartbeats held in memory must do three times what one durable commit per heartbeat does"})
	}

	r.floor(ctx, closed, cpu)

	// The same load with successive heartbeats on servers of one tenant:
	// the best case of a batch that sends statements per tenant.
	r.log.Info("closed-loop heartbeats through mcpd, grouped by tenant", "clients", r.cfg.Clients, "duration", r.cfg.OpenDuration)
	cpu0 = TakeCPUSnapshot(m.PID(), r.pg.PID())
	grouped := ClosedLoop(ctx, r.cfg.Clients, r.cfg.OpenDuration, r.cfg.MaxCalls, fleet.HeartbeatGrouped)
	cpu = TakeCPUSnapshot(m.PID(), r.pg.PID()).Since(cpu0)
	r.rep.Details["e2e_grouped"] = grouped
	r.rep.Details["e2e_grouped_cpu"] = cpu
	r.rep.add(Row{ID: "e2e_grouped", Measure: fmt.Sprintf("b. same, successive heartbeats on one tenant's servers (%d clients)", r.cfg.Clients),
		Value: grouped.Throughput, Unit: unitPerSecond,
		Note: fmt.Sprintf("p50 %.2f ms, p99 %.2f ms, %d errors; %s", millis(grouped.P50), millis(grouped.P99), grouped.Errors, cpu.Describe("mcpd"))})
	_, pgGroupedUS := cpu.PerCall(grouped.Calls, grouped.Elapsed)
	r.rep.add(Row{ID: "e2e_grouped_cpu_pg", Measure: "b. PostgreSQL CPU per heartbeat, grouped by tenant", Value: pgGroupedUS, Unit: unitMicros})

	rate := closed.Throughput / 2
	r.log.Info("open-loop heartbeats through mcpd", "rate", int(rate), "duration", r.cfg.OpenDuration)
	probe = r.startTailProbe(m)
	open := OpenLoop(ctx, rate, 4*r.cfg.Clients, r.cfg.OpenDuration, loadDrain, r.cfg.MaxCalls, fleet.Heartbeat)
	r.rep.Details["e2e_open"] = open
	r.rep.Details["e2e_open_tail"] = probe.finish(open)
	r.rep.add(Row{ID: "e2e_open_p99", Measure: fmt.Sprintf("b. mcpd heartbeat p99, open loop at %s/s (half the closed loop)",
		groupThousands(rate)), Value: millis(open.P99), Unit: unitMillis, Target: millis(targetOpenP99), Direction: AtMost,
		Note: fmt.Sprintf("p50 %.2f ms, p99.9 %.2f ms, %d errors", millis(open.P50), millis(open.P999), open.Errors)})

	// e. listing.
	r.log.Info("list latency", "duration", r.cfg.ListDuration)
	small := ListPage(ctx, fleet.Client(1), r.cfg.Modules, r.cfg.ListDuration, r.cfg.MaxCalls)
	r.rep.Details["list_small"] = small
	r.rep.add(Row{ID: "list_small_p99", Measure: fmt.Sprintf("e. GET /v1/mcp/servers, tenant of %d, limit %d: p99", r.cfg.Modules, r.cfg.Modules),
		Value: millis(small.P99), Unit: unitMillis, Target: millis(targetListP99), Direction: AtMost,
		Note: fmt.Sprintf("p50 %.2f ms, %d calls, %d errors", millis(small.P50), small.Calls, small.Errors)})
	if avail, n, err := AvailabilityList(ctx, fleet.Client(1), r.cfg.ListDuration, r.cfg.MaxCalls); err != nil {
		r.rep.fail("availability_list_p99", "e. GET /v1/mcp/availability", err)
	} else {
		r.rep.Details["availability_list"] = avail
		r.rep.add(Row{ID: "availability_list_p99", Measure: fmt.Sprintf("e. GET /v1/mcp/availability, 24 h ratios of %d servers: p99", n),
			Value: millis(avail.P99), Unit: unitMillis, Target: millis(targetAvailabilityListP99), Direction: AtMost,
			Note: fmt.Sprintf("p50 %.2f ms, %d calls, %d errors", millis(avail.P50), avail.Calls, avail.Errors)})
	}
	if r.cfg.BigTenant > 0 {
		big, err := NewTenantClient(m.URL, r.secret, BigTenantID())
		if err != nil {
			r.rep.fail("list_big_p99", "e. GET /v1/mcp/servers paging", err)
		} else {
			paging := ListPaging(ctx, big, 100, r.cfg.BigTenant, r.cfg.ListDuration, r.cfg.MaxCalls)
			big.CloseIdleConnections()
			r.rep.Details["list_big"] = paging
			r.rep.add(Row{ID: "list_big_p99", Measure: fmt.Sprintf("e. GET /v1/mcp/servers, paging a tenant of %s by 100: p99 per page",
				groupThousands(float64(r.cfg.BigTenant))), Value: millis(paging.P99), Unit: unitMillis,
				Target: millis(targetListP99), Direction: AtMost,
				Note: fmt.Sprintf("p50 %.2f ms, %d pages, %d errors", millis(paging.P50), paging.Calls, paging.Errors)})
		}
	}

	// f. memory under the closed loop.
	if memErr != nil {
		r.rep.fail("rss", "f. mcpd RSS", memErr)
		return
	}
	r.rep.Details["mcpd_memory"] = map[string]Memory{"idle": idle, "after_load": mem, "peak_sampled": peak}
	r.rep.add(Row{ID: "rss", Measure: fmt.Sprintf("f. mcpd VmHWM, %s servers in PostgreSQL, at full heartbeat load", groupThousands(float64(r.servers()))),
		Value: mib(mem.HWM), Unit: unitMiB, Target: targetRSSMiB, Direction: AtMost,
		Note: fmt.Sprintf("VmRSS idle %.1f MiB, after load %.1f MiB", mib(idle.RSS), mib(mem.RSS))})
}

// rssSampler samples a process's VmRSS until stopped.
type rssSampler struct {
	stopCh chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	peak   Memory
}

func startRSSSampler(pid int) *rssSampler {
	s := &rssSampler{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(rssSamplePeriod)
		defer t.Stop()
		for {
			if m, err := ReadMemory(pid); err == nil {
				s.mu.Lock()
				if m.RSS > s.peak.RSS {
					s.peak.RSS = m.RSS
				}
				s.peak.HWM = m.HWM
				s.mu.Unlock()
			}
			select {
			case <-s.stopCh:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() Memory {
	close(s.stopCh)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Profiles of the heartbeat path, in process.
func (r *runner) profile(ctx context.Context) {
	if r.cfg.ProfileDir == "" {
		return
	}
	r.log.Info("profiling heartbeats in process", "dir", r.cfg.ProfileDir, "duration", r.cfg.ProfileDuration)
	res, err := ProfileHeartbeats(ctx, r.appURL, r.secretFile, r.secret, r.cfg.Tenants, r.cfg.Modules,
		r.cfg.Clients, r.cfg.ProfileDuration, r.cfg.MaxCalls, r.cfg.ProfileDir)
	if err != nil {
		r.rep.fail("profile", "profile: in-process heartbeats", err)
		return
	}
	r.rep.Details["profile"] = res
	r.rep.add(Row{ID: "profile", Measure: fmt.Sprintf("profile: in-process mcpd heartbeats/s, %d clients (profiler on)", r.cfg.Clients),
		Value: res.Load.Throughput, Unit: unitPerSecond, Note: "profiles in " + r.cfg.ProfileDir})
}

// c. etcd's lease keep-alive, when etcd is installed.
func (r *runner) etcd(ctx context.Context) {
	measure := fmt.Sprintf("c. etcd lease KeepAliveOnce/s (HTTP gateway), %d clients", r.cfg.Clients)
	bin := FindEtcd(r.cfg.Etcd)
	if bin == "" {
		r.rep.Machine.Etcd = "not installed"
		r.rep.skip("etcd", measure, "etcd not installed (apt-get install etcd-server)")
		return
	}
	r.log.Info("etcd baseline", "bin", bin, "leases", r.cfg.EtcdLeases, "clients", r.cfg.Clients)
	e, err := StartEtcd(ctx, bin, r.work)
	if err != nil {
		r.rep.fail("etcd", measure, err)
		return
	}
	defer func() {
		if err := e.Stop(mcpdShutdown); err != nil {
			r.log.Warn("stop etcd", "err", err)
		}
	}()
	r.rep.Machine.Etcd = e.Version
	ids, err := e.GrantLeases(ctx, r.cfg.EtcdLeases, r.cfg.Clients, time.Hour)
	if err != nil {
		r.rep.fail("etcd", measure, err)
		return
	}
	op := func(ctx context.Context, seq int64) error { return e.KeepAlive(ctx, ids[seq%int64(len(ids))]) }
	ClosedLoop(ctx, r.cfg.Clients, time.Second, r.cfg.MaxCalls, op)
	cpu0 := TakeCPUSnapshot(e.PID(), r.pg.PID())
	res := ClosedLoop(ctx, r.cfg.Clients, r.cfg.Duration, r.cfg.MaxCalls, op)
	cpu := TakeCPUSnapshot(e.PID(), r.pg.PID()).Since(cpu0)
	r.rep.Details["etcd"] = res
	r.rep.Details["etcd_cpu"] = cpu
	if res.Throughput == 0 {
		r.rep.fail("etcd", measure, fmt.Errorf("no keep-alive succeeded: %s", res.FirstError))
		return
	}
	r.rep.add(Row{ID: "etcd", Measure: measure, Value: res.Throughput, Unit: unitPerSecond,
		Note: fmt.Sprintf("p50 %.2f ms, p99 %.2f ms, %d errors; %s", millis(res.P50), millis(res.P99), res.Errors, cpu.Describe("etcd"))})
	etcdUS, _ := cpu.PerCall(res.Calls, res.Elapsed)
	r.rep.add(Row{ID: "etcd_cpu", Measure: "c. etcd CPU per keep-alive (gateway + gRPC + lessor)", Value: etcdUS, Unit: unitMicros})
	if closed, ok := r.rep.Details["e2e_closed"].(LoadResult); ok && closed.Throughput > 0 {
		r.rep.add(Row{ID: "e2e_vs_etcd", Measure: "b÷c. mcpd durable heartbeats/s ÷ etcd keep-alives/s", Value: closed.Throughput / res.Throughput,
			Unit: unitRatio, Target: 1, Direction: AtLeast, Basis: BasisWall,
			Note: "taken a minute apart on a shared machine; etcd keeps leases in memory, no disk write per keep-alive"})
	}
	if mcpdCPU, ok := r.rep.Details["e2e_closed_cpu"].(CPUUse); ok {
		if closed, ok := r.rep.Details["e2e_closed"].(LoadResult); ok && closed.Calls > 0 {
			mcpdUS, pgUS := mcpdCPU.PerCall(closed.Calls, closed.Elapsed)
			if mcpdUS+pgUS > 0 {
				r.rep.add(Row{ID: "e2e_vs_etcd_cpu", Measure: "b÷c. CPU per call: etcd keep-alive ÷ (mcpd + PostgreSQL) heartbeat",
					Value: etcdUS / (mcpdUS + pgUS), Unit: unitRatio, Target: 1, Direction: AtLeast, Basis: BasisCPU,
					Note: "CPU time per call, robust to the machine's load: at most etcd's cost per durable heartbeat"})
			}
		}
	}
}

// d. the sweep at LargeTenants x Modules, nothing due.
func (r *runner) largeSweep(ctx context.Context) {
	if r.cfg.LargeTenants == 0 {
		return
	}
	n := r.cfg.LargeTenants * r.cfg.Modules
	measure := fmt.Sprintf("d. sweep, %s servers, nothing due (median)", groupThousands(float64(n+r.cfg.BigTenant)))
	r.log.Info("seeding the large fleet", "servers", n)
	sctx, cancel := context.WithTimeout(ctx, seedTimeout)
	t0 := time.Now()
	// Skills are not needed when nothing is due: the sweep does not read them.
	err := SeedServers(sctx, r.admin, r.cfg.Tenants+1, r.cfg.LargeTenants, r.cfg.Modules, r.seededAt, false)
	cancel()
	if err != nil {
		r.rep.fail("sweep_large", measure, err)
		return
	}
	r.rep.Details["seed_large_seconds"] = time.Since(t0).Seconds()
	res, err := SweepNothingDue(ctx, r.admin, r.app, r.seededAt, r.cfg.SweepRuns)
	if err != nil {
		r.rep.fail("sweep_large", measure, err)
		return
	}
	r.rep.Details["sweep_large"] = res
	r.rep.add(Row{ID: "sweep_large", Measure: measure, Value: millis(res.Median), Unit: unitMillis,
		Target: millis(targetSweep), Direction: AtMost})
}

// f. mcpd --dev holding the fleet in its memstore.
func (r *runner) dev(ctx context.Context) {
	if !r.cfg.DevServers {
		return
	}
	n := r.servers()
	measure := fmt.Sprintf("f. mcpd --dev VmRSS holding %s servers (registered through the API)", groupThousands(float64(n)))
	if r.mcpdBin == "" {
		r.rep.skip("dev_rss", measure, "no mcpd binary")
		return
	}
	m, err := StartMCPD(ctx, r.mcpdBin, r.work, "mcpd-dev", "--dev", "--auth-jwt-secret-file", r.secretFile,
		"--heartbeat-interval", mcpdHeartbeatInterval.String())
	if err != nil {
		r.rep.fail("dev_rss", measure, err)
		return
	}
	defer func() {
		if err := m.Stop(mcpdShutdown); err != nil {
			r.log.Warn("stop mcpd --dev", "err", err)
		}
	}()
	fleet, err := NewFleet(m.URL, r.secret, r.cfg.Tenants, r.cfg.Modules)
	if err != nil {
		r.rep.fail("dev_rss", measure, err)
		return
	}
	defer fleet.Close()
	idle, _ := ReadMemory(m.PID())
	r.log.Info("registering the fleet in mcpd --dev", "servers", n)
	reg := ClosedLoop(ctx, r.cfg.Clients, 2*time.Minute, int64(n), func(ctx context.Context, seq int64) error {
		t, mod := int(seq)/r.cfg.Modules+1, int(seq)%r.cfg.Modules+1
		_, _, err := fleet.Client(t).Register(ctx, RegisterRequest(mod), "")
		return err
	})
	r.rep.Details["dev_register"] = reg
	if reg.Errors > 0 || reg.Calls < int64(n) {
		r.rep.fail("dev_rss", measure, fmt.Errorf("registered %d of %d servers, %d errors: %s", reg.Calls-reg.Errors, n, reg.Errors, reg.FirstError))
		return
	}
	mem, err := ReadMemory(m.PID())
	if err != nil {
		r.rep.fail("dev_rss", measure, err)
		return
	}
	r.rep.Details["dev_memory"] = map[string]Memory{"idle": idle, "full": mem}
	r.rep.add(Row{ID: "dev_rss", Measure: measure, Value: mib(mem.RSS), Unit: unitMiB, Target: targetDevRSSMiB, Direction: AtMost,
		Note: fmt.Sprintf("idle %.1f MiB, VmHWM %.1f MiB, ~%.0f B/server, registered at %.0f/s",
			mib(idle.RSS), mib(mem.HWM), float64(mem.RSS-idle.RSS)/float64(n), reg.Throughput)})

	heap, err := MemstoreHeap(ctx, r.cfg.Tenants, r.cfg.Modules)
	if err != nil {
		r.rep.fail("memstore_heap", "f. memstore Go heap", err)
		return
	}
	r.rep.Details["memstore_heap"] = heap
	r.rep.add(Row{ID: "memstore_heap", Measure: fmt.Sprintf("f. memstore Go heap per server, %s servers (in process, after GC)", groupThousands(float64(n))),
		Value: heap.PerServer, Unit: unitBytes, Note: fmt.Sprintf("%.1f MiB in all", mib(heap.HeapInuse))})
}
