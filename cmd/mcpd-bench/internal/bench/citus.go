package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/schema"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// The Citus row set (i.): the same store load on a plain PostgreSQL cluster
// and on a Citus cluster of three nodes (a coordinator and two workers), all
// on this machine, durable, through pgstore in this process as mcpd runs it
// (cyberos_app, its batcher, its sweep). Each engine in turn: register the
// fleet, heartbeat it at light load and at saturation while a sweep runs
// every second, and count the sweep's transitions, every one of them false
// (each server heartbeats far more often than the sweep's threshold). These
// are the store path's rows; then the same fleet and loads through a real
// mcpd on the same clusters (citusmcpd.go), heartbeats held in memory.
const (
	citusRegClients   = 8                // concurrent registrations
	citusSerialRegs   = 200              // registrations one after another, after the fleet's
	citusLightClients = 4                // callers of the light load
	citusSatClients   = 64               // callers of the saturation load
	citusSweepPeriod  = time.Second      // the sweep's period during the loads
	citusSweepEvery   = 30 * time.Second // the sweep's interval: degraded after 60 s of silence
	citusSweepTimeout = 30 * time.Second // bounds one sweep
	citusBlindAfter   = 10 * time.Second
)

// Targets of issue 30: Citus ÷ plain.
const (
	targetCitusLight    = 0.7
	targetCitusSat      = 0.5
	targetCitusRegister = 0.5 // registration within 2x plain
)

// CitusEngineResult is what one engine did under the Citus row set's load.
type CitusEngineResult struct {
	Engine string `json:"engine"`
	// Register is the fleet's registration (citusRegClients callers);
	// Serial the registrations one after another.
	Register LoadResult `json:"register"`
	Serial   LoadResult `json:"register_serial"`
	// Light and Saturation are the heartbeat loads.
	Light      LoadResult `json:"light"`
	Saturation LoadResult `json:"saturation"`
	// PGMicrosLight and PGMicrosSat are the CPU time of every PostgreSQL
	// process of the engine (all nodes) per heartbeat.
	PGMicrosLight float64 `json:"pg_cpu_us_light"`
	PGMicrosSat   float64 `json:"pg_cpu_us_saturation"`
	PGMicrosReg   float64 `json:"pg_cpu_us_register"`
	// Sweeps are the sweeps run during the heartbeat loads; Transitions
	// what they applied (all false); SweepErrors those that failed.
	Sweeps      int             `json:"sweeps"`
	SweepMedian time.Duration   `json:"sweep_median_ns"`
	SweepRuns   []time.Duration `json:"sweep_runs_ns"`
	Transitions int             `json:"false_transitions"`
	SweepErrors int             `json:"sweep_errors"`
	SweepError  string          `json:"sweep_first_error,omitempty"`
	// MCPD is the same fleet's load through a real mcpd (citusmcpd.go) on
	// the same clusters; MCPDError why it could not run.
	MCPD      *CitusMCPDResult `json:"mcpd,omitempty"`
	MCPDError string           `json:"mcpd_error,omitempty"`
}

// citusEngine is one engine of the row set: its clusters and its store.
type citusEngine struct {
	name  string
	pids  func() []int
	admin *pgxpool.Pool
	app   *pgxpool.Pool
	store *pgstore.Store
}

func (e *citusEngine) close() {
	if e.store != nil {
		e.store.Close()
	}
	if e.app != nil {
		e.app.Close()
	}
	if e.admin != nil {
		e.admin.Close()
	}
}

// pgCPU is the CPU time, in seconds, of every PostgreSQL process of the
// engine's nodes.
func (e *citusEngine) pgCPU() float64 {
	var s float64
	for _, pid := range e.pids() {
		s += TakeCPUSnapshot(0, pid).postgres
	}
	return s
}

// openEngine migrates database (created already) through adminURL, makes
// AppRole a member of cyberos_app and opens the store as cyberos_app.
func openEngine(ctx context.Context, name string, pids func() []int, adminURL, appURL string) (*citusEngine, error) {
	e := &citusEngine{name: name, pids: pids}
	if err := schema.Up(ctx, adminURL); err != nil {
		return e, fmt.Errorf("%s: migrate: %w", name, err)
	}
	var err error
	if e.admin, err = newPool(ctx, adminURL, 4); err != nil {
		return e, err
	}
	for _, q := range []string{
		`CREATE ROLE ` + AppRole + ` LOGIN INHERIT NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION`,
		`GRANT cyberos_app TO ` + AppRole,
	} {
		if _, err := e.admin.Exec(ctx, q); err != nil {
			return e, fmt.Errorf("%s: %s: %w", name, q, err)
		}
	}
	if e.app, err = newPool(ctx, appURL, pgstore.DefaultMaxConns); err != nil {
		return e, err
	}
	e.store = pgstore.New(e.app, pgstore.Options{})
	return e, nil
}

// citusRows runs the Citus row set when Citus is installed.
func (r *runner) citusRows(ctx context.Context) {
	if r.cfg.CitusServers == 0 {
		return
	}
	ok, err := pgtest.CitusInstalled()
	if err != nil || !ok {
		why := "Citus is not installed: " + pgtest.InstallCitus
		if err != nil {
			why = err.Error()
		}
		r.rep.skip("citus", "i. Citus ÷ plain PostgreSQL", why)
		return
	}
	var results []CitusEngineResult
	for _, engine := range []string{"plain", "citus"} {
		res, err := r.citusEngineRun(ctx, engine)
		if err != nil {
			r.rep.fail("citus_"+engine, "i. "+engine+": the Citus row set's load", err)
			return
		}
		results = append(results, res)
	}
	r.rep.Details["citus"] = results
	r.citusReport(results[0], results[1])
	var mcpdErr error
	for _, res := range results {
		if res.MCPDError != "" {
			mcpdErr = fmt.Errorf("%s: %s", res.Engine, res.MCPDError)
			break
		}
	}
	r.citusMCPDReport(results[0].MCPD, results[1].MCPD, mcpdErr)
}

// citusEngineRun starts the engine's clusters (durable, in the work
// directory), runs the load and stops them.
func (r *runner) citusEngineRun(ctx context.Context, engine string) (CitusEngineResult, error) {
	opts := pgtest.ClusterOptions{Durable: true, BaseDir: r.work}
	const db = "mcpd_bench_citus"
	var (
		e      *citusEngine
		mcpdDB citusDatabase
		err    error
	)
	r.log.Info("Citus row set: starting", "engine", engine)
	setup, cancel := context.WithTimeout(ctx, seedTimeout)
	defer cancel()
	switch engine {
	case "plain":
		pg, serr := pgtest.StartCluster(opts)
		if serr != nil {
			return CitusEngineResult{}, serr
		}
		defer func() { _ = pg.Destroy() }()
		if r.rep.Machine.PostgreSQL == "" {
			r.rep.Machine.PostgreSQL, r.rep.Machine.DataFS = pg.ServerVersion(), pg.FSType()
		}
		if err := execOn(setup, pg.URL("postgres", "postgres"), `CREATE DATABASE `+db); err != nil {
			return CitusEngineResult{}, err
		}
		e, err = openEngine(setup, engine, func() []int { return []int{pg.PID()} }, pg.URL("postgres", db), pg.URL(AppRole, db))
		mcpdDB = citusDatabase{
			create: func(ctx context.Context) error {
				return execOn(ctx, pg.URL("postgres", "postgres"), `CREATE DATABASE `+citusMCPDDatabase)
			},
			adminURL: pg.URL("postgres", citusMCPDDatabase), appURL: pg.URL(AppRole, citusMCPDDatabase)}
	default:
		c, serr := pgtest.StartCitus(opts)
		if serr != nil {
			return CitusEngineResult{}, serr
		}
		defer func() { _ = c.Destroy() }()
		if err := c.CreateDatabase(setup, db); err != nil {
			return CitusEngineResult{}, err
		}
		co := c.Coordinator
		pids := func() []int {
			ps := []int{co.PID()}
			for _, w := range c.Workers {
				ps = append(ps, w.PID())
			}
			return ps
		}
		e, err = openEngine(setup, engine, pids, co.URL("postgres", db), co.URL(AppRole, db))
		mcpdDB = citusDatabase{
			create:   func(ctx context.Context) error { return c.CreateDatabase(ctx, citusMCPDDatabase) },
			adminURL: co.URL("postgres", citusMCPDDatabase), appURL: co.URL(AppRole, citusMCPDDatabase)}
		if err == nil {
			var version string
			if qerr := e.admin.QueryRow(setup, `SELECT extversion FROM pg_extension WHERE extname = 'citus'`).Scan(&version); qerr == nil {
				r.rep.Details["citus_version"] = version
			}
		}
	}
	if e != nil {
		defer e.close()
	}
	if err != nil {
		return CitusEngineResult{}, err
	}
	res, err := r.citusLoad(ctx, e)
	if err != nil {
		return res, err
	}
	// The same load through a real mcpd, on the same clusters.
	if res.MCPD, err = r.citusMCPD(ctx, e, mcpdDB); err != nil {
		res.MCPD, res.MCPDError = nil, err.Error()
		r.log.Warn("Citus row set through mcpd", "engine", engine, "err", err)
	}
	return res, nil
}

func execOn(ctx context.Context, url, stmt string) error {
	pool, err := newPool(ctx, url, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

type citusTarget struct{ tenant, server uuid.UUID }

// citusFleetTenants are the Citus row set's tenants (-citus-tenants), the
// same on both engines and in every run.
func (r *runner) citusFleetTenants() []uuid.UUID {
	tenants := make([]uuid.UUID, r.cfg.CitusTenants)
	for i := range tenants {
		tenants[i] = md5UUID(fmt.Sprintf("citus-tenant%d", i))
	}
	return tenants
}

func citusInfo(i int) registry.ServerInfo {
	return registry.ServerInfo{ModuleName: fmt.Sprintf("module-%05d", i), Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"},
		Skills:             []registry.SkillInfo{{Name: "search"}, {Name: "summarize"}}}
}

// citusLoad registers the fleet and heartbeats it at light load and at
// saturation, sweeping meanwhile.
func (r *runner) citusLoad(ctx context.Context, e *citusEngine) (CitusEngineResult, error) {
	res := CitusEngineResult{Engine: e.name}
	n := r.cfg.CitusServers
	tenants := r.citusFleetTenants()
	// Every server registered heartbeats, those registered one after
	// another too: silent, they would go degraded when the loads last
	// longer than the sweep's threshold (-citus-duration 30s or more).
	targets := make([]citusTarget, n+citusSerial(n))
	var regErr atomic.Pointer[error]
	register := func(ctx context.Context, i int) error {
		tenant := tenants[i%len(tenants)]
		srv, _, _, err := e.store.Register(ctx, tenant, citusInfo(i), 0)
		if err != nil {
			regErr.CompareAndSwap(nil, &err)
			return err
		}
		targets[i] = citusTarget{tenant, srv.ServerID}
		return nil
	}
	r.log.Info("Citus row set: registering", "engine", e.name, "servers", n, "callers", citusRegClients)
	cpu0 := e.pgCPU()
	res.Register = ClosedLoop(ctx, citusRegClients, 5*time.Minute, int64(n), func(ctx context.Context, seq int64) error {
		return register(ctx, int(seq))
	})
	if res.Register.Calls > 0 {
		res.PGMicrosReg = (e.pgCPU() - cpu0) * 1e6 / float64(res.Register.Calls)
	}
	if res.Register.Errors > 0 || res.Register.Calls < int64(n) {
		msg := res.Register.FirstError
		if p := regErr.Load(); p != nil {
			msg = (*p).Error()
		}
		return res, fmt.Errorf("%s: registered %d of %d servers: %s", e.name, res.Register.Calls-res.Register.Errors, n, msg)
	}
	res.Serial = ClosedLoop(ctx, 1, time.Minute, int64(citusSerial(n)), func(ctx context.Context, seq int64) error {
		return register(ctx, n+int(seq))
	})
	if res.Serial.Errors > 0 {
		return res, fmt.Errorf("%s: serial registration: %s", e.name, res.Serial.FirstError)
	}

	heartbeat := func(ctx context.Context, seq int64) error {
		t := targets[seq%int64(len(targets))]
		_, _, err := e.store.Heartbeat(ctx, t.tenant, t.server)
		return err
	}
	var sweeps sweepLog
	phase := func(name string, clients int) (LoadResult, float64, error) {
		// Every server heartbeats once first: none is silent for long
		// whatever the engine's pace.
		warm := ClosedLoop(ctx, citusSatClients, time.Minute, int64(len(targets)), heartbeat)
		if warm.Errors > 0 || warm.Calls < int64(len(targets)) {
			return warm, 0, fmt.Errorf("%s: warm-up heartbeats: %d of %d, %s", e.name, warm.Calls-warm.Errors, len(targets), warm.FirstError)
		}
		r.log.Info("Citus row set: heartbeats", "engine", e.name, "load", name, "callers", clients, "duration", r.cfg.CitusDuration)
		stop := sweeps.start(ctx, e.store)
		cpu0 := e.pgCPU()
		lr := ClosedLoop(ctx, clients, r.cfg.CitusDuration, r.cfg.MaxCalls, heartbeat)
		pgUS := 0.0
		if lr.Calls > 0 {
			pgUS = (e.pgCPU() - cpu0) * 1e6 / float64(lr.Calls)
		}
		stop()
		return lr, pgUS, nil
	}
	var err error
	if res.Light, res.PGMicrosLight, err = phase("light", citusLightClients); err != nil {
		return res, err
	}
	if res.Saturation, res.PGMicrosSat, err = phase("saturation", citusSatClients); err != nil {
		return res, err
	}
	sweeps.fill(&res)
	return res, nil
}

// citusSerial is how many registrations of the row set go one after
// another: citusSerialRegs, at most the fleet's size.
func citusSerial(n int) int { return min(citusSerialRegs, n) }

// sweepLog runs the sweep every citusSweepPeriod during a load and keeps
// what it did.
type sweepLog struct {
	mu          sync.Mutex
	runs        []time.Duration
	transitions int
	errors      int
	firstErr    string
}

// start sweeps until the returned function is called, which waits for the
// sweep in flight to end: cut short, a first sweep on a loaded machine
// (new connections on every node) made a load of a short run sweep not
// once (the harness's test, 1.5 s loads beside the unit tests).
func (l *sweepLog) start(ctx context.Context, st *pgstore.Store) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(citusSweepPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-t.C:
			}
			t0 := time.Now()
			sctx, cancel := context.WithTimeout(ctx, citusSweepTimeout)
			sr, err := st.Sweep(sctx, store.SweepRequest{Interval: citusSweepEvery,
				Limit: lifecycle.DefaultSweepBatch, BlindAfter: citusBlindAfter})
			cancel()
			d := time.Since(t0)
			l.mu.Lock()
			switch {
			case err != nil && ctx.Err() != nil:
			case err != nil:
				l.errors++
				if l.firstErr == "" {
					l.firstErr = err.Error()
				}
			default:
				l.runs = append(l.runs, d)
				l.transitions += len(sr.Events)
			}
			l.mu.Unlock()
		}
	}()
	return func() { close(stop); <-done }
}

func (l *sweepLog) fill(res *CitusEngineResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	res.Sweeps, res.SweepRuns = len(l.runs), slices.Clone(l.runs)
	res.Transitions, res.SweepErrors, res.SweepError = l.transitions, l.errors, l.firstErr
	if len(l.runs) > 0 {
		s := slices.Clone(l.runs)
		slices.Sort(s)
		res.SweepMedian = s[len(s)/2]
	}
}

// citusRatio is the row of a load's rate on Citus ÷ plain, against target
// (0: none), with both engines' figures and PostgreSQL CPU per call (pgP,
// pgC; both 0: not measured, left out) in its note; an error row when
// plain did nothing.
func citusRatio(id, measure string, p, c LoadResult, target, pgP, pgC float64) Row {
	if p.Throughput == 0 {
		return Row{ID: id, Measure: measure, Verdict: "error", Note: firstLine("plain PostgreSQL did nothing: " + p.FirstError)}
	}
	// CPU per call, when the load measured it.
	plainCPU, citusCPU := "", ""
	if pgP > 0 || pgC > 0 {
		plainCPU = fmt.Sprintf(", PostgreSQL CPU %.0f µs per call", pgP)
		citusCPU = fmt.Sprintf(", CPU of the 3 nodes %.0f µs per call", pgC)
	}
	row := Row{ID: id, Measure: measure, Value: c.Throughput / p.Throughput, Unit: unitRatio, Basis: BasisWall,
		Note: fmt.Sprintf("plain %s/s (p50 %.2f ms, p99 %.2f ms, %d errors%s); "+
			"Citus %s/s (p50 %.2f ms, p99 %.2f ms, %d errors%s)",
			groupThousands(p.Throughput), millis(p.P50), millis(p.P99), p.Errors, plainCPU,
			groupThousands(c.Throughput), millis(c.P50), millis(c.P99), c.Errors, citusCPU)}
	if target > 0 {
		row.Target, row.Direction = target, AtLeast
	}
	return row
}

// citusReport adds the store path's rows (pgstore in this process, each
// heartbeat a store call): each load's ratio Citus ÷ plain against the
// issue's targets, with both engines' figures in the note.
func (r *runner) citusReport(plain, citus CitusEngineResult) {
	ratio := func(id, measure string, p, c LoadResult, target float64, pgP, pgC float64) {
		r.rep.add(citusRatio(id, measure, p, c, target, pgP, pgC))
	}
	n := groupThousands(float64(r.cfg.CitusServers))
	beating := groupThousands(float64(r.cfg.CitusServers + citusSerial(r.cfg.CitusServers)))
	ratio("citus_light", fmt.Sprintf("i. store path: heartbeats/s Citus ÷ plain, light load (%d callers, %s servers of %d tenants)",
		citusLightClients, beating, r.cfg.CitusTenants), plain.Light, citus.Light, targetCitusLight, plain.PGMicrosLight, citus.PGMicrosLight)
	ratio("citus_saturation", fmt.Sprintf("i. store path: heartbeats/s Citus ÷ plain, saturation (%d callers)", citusSatClients),
		plain.Saturation, citus.Saturation, targetCitusSat, plain.PGMicrosSat, citus.PGMicrosSat)
	if plain.PGMicrosSat > 0 {
		r.rep.add(Row{ID: "citus_saturation_cpu", Measure: "i. store path: PostgreSQL CPU per heartbeat at saturation, Citus (3 nodes) ÷ plain",
			Value: citus.PGMicrosSat / plain.PGMicrosSat, Unit: unitRatio, Basis: BasisCPU,
			Note: fmt.Sprintf("%.0f µs ÷ %.0f µs: CPU time, robust to a busy machine", citus.PGMicrosSat, plain.PGMicrosSat)})
	}
	false0 := Row{ID: "citus_false_transitions", Measure: "i. store path: false transitions of the sweep during both loads, Citus (plain)",
		Value: float64(citus.Transitions), Unit: unitCount, Direction: AtMost, Verdict: "pass",
		Note: fmt.Sprintf("%d sweeps on Citus (%d failed), %d on plain with %d transitions (%d failed)",
			citus.Sweeps, citus.SweepErrors, plain.Sweeps, plain.Transitions, plain.SweepErrors)}
	if citus.Transitions+plain.Transitions > 0 || citus.Sweeps == 0 || citus.SweepErrors+plain.SweepErrors > 0 {
		false0.Verdict = "FAIL"
	}
	r.rep.Rows = append(r.rep.Rows, false0)
	if plain.SweepMedian > 0 {
		r.rep.add(Row{ID: "citus_sweep", Measure: fmt.Sprintf("i. store path: sweep during the loads, nothing due, %d tenants (median): Citus ÷ plain", r.cfg.CitusTenants),
			Value: float64(citus.SweepMedian) / float64(plain.SweepMedian), Unit: unitRatio, Basis: BasisWall,
			Note: fmt.Sprintf("Citus %.2f ms, plain %.2f ms; on Citus one read of every shard, then a transaction per tenant with a server due", millis(citus.SweepMedian), millis(plain.SweepMedian))})
	}
	ratio("citus_register", fmt.Sprintf("i. store path: registrations/s Citus ÷ plain, %s servers, %d callers (within 2x: ≥ 0.5)", n, citusRegClients),
		plain.Register, citus.Register, targetCitusRegister, plain.PGMicrosReg, citus.PGMicrosReg)
	r.rep.add(Row{ID: "citus_register_seconds", Measure: fmt.Sprintf("i. store path: registering %s servers: Citus (plain)", n),
		Value: citus.Register.Elapsed.Seconds(), Unit: unitSeconds, Note: fmt.Sprintf("plain %.2f s", plain.Register.Elapsed.Seconds())})
	ratio("citus_register_serial", fmt.Sprintf("i. store path: registrations/s Citus ÷ plain, one after another (%d)", citusSerial(r.cfg.CitusServers)),
		plain.Serial, citus.Serial, 0, 0, 0)
}
