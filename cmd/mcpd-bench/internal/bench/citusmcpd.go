package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/schema"
)

// The Citus row set's rows through mcpd: on the same clusters as the store
// rows, in a database of its own (the store rows' fleet, silent from then
// on, would go due), a real mcpd binary with its defaults (heartbeats held
// in memory and written once per 500 ms window, one statement per tenant on
// Citus; a 10 s interval, a sweep every 5 s). The fleet registers through
// the HTTP API, then heartbeats at light load and at saturation; every
// transition the audit holds afterwards is false, since every server
// heartbeats far more often than every 20 s.
const citusMCPDDatabase = "mcpd_bench_citus_mcpd"

// CitusMCPDResult is what one engine did under the Citus row set's load
// through a real mcpd.
type CitusMCPDResult struct {
	// Register is the fleet's registration through the API
	// (citusRegClients callers); Light and Saturation the heartbeat loads
	// (citusLightClients and citusSatClients callers).
	Register   LoadResult `json:"register"`
	Light      LoadResult `json:"light"`
	Saturation LoadResult `json:"saturation"`
	// PGMicros* are the CPU time of every PostgreSQL process of the engine
	// (all nodes) per call of each load.
	PGMicrosReg   float64 `json:"pg_cpu_us_register"`
	PGMicrosLight float64 `json:"pg_cpu_us_light"`
	PGMicrosSat   float64 `json:"pg_cpu_us_saturation"`
	// Registered are the audit's registrations; Transitions its other
	// events (degraded, unhealthy, recovered, deregistered), all false.
	Registered  int `json:"registered_events"`
	Transitions int `json:"false_transitions"`
	// Sweeps and SweepFailures are mcpd's monitor sweeps while it ran
	// (its /metrics); Flush its held heartbeats' writes.
	Sweeps        float64      `json:"monitor_sweeps"`
	SweepFailures float64      `json:"monitor_sweep_failures"`
	Flush         FlushMetrics `json:"flush"`
}

// citusDatabase is the mcpd rows' database on an engine's clusters.
type citusDatabase struct {
	// create makes the database (on every node of a Citus cluster);
	// adminURL and appURL reach it as the superuser and as AppRole.
	create           func(ctx context.Context) error
	adminURL, appURL string
}

// citusMCPDSetup makes sure the harness has an mcpd binary and a JWT
// secret for the mcpd rows (a -citus-only run has neither yet).
func (r *runner) citusMCPDSetup(ctx context.Context) error {
	if err := r.ensureMCPD(ctx); err != nil {
		return err
	}
	if r.secretFile == "" {
		var err error
		if r.secretFile, r.secret, err = WriteSecret(r.work); err != nil {
			return err
		}
	}
	return nil
}

// citusMCPD runs the mcpd rows' load on engine e, in database db.
func (r *runner) citusMCPD(ctx context.Context, e *citusEngine, db citusDatabase) (*CitusMCPDResult, error) {
	if err := r.citusMCPDSetup(ctx); err != nil {
		return nil, err
	}
	setup, cancel := context.WithTimeout(ctx, seedTimeout)
	defer cancel()
	if err := db.create(setup); err != nil {
		return nil, err
	}
	if err := schema.Up(setup, db.adminURL); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", citusMCPDDatabase, err)
	}
	admin, err := newPool(setup, db.adminURL, 2)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	m, err := StartMCPD(ctx, r.mcpdBin, r.work, "mcpd-citus-"+e.name, "--database-url", db.appURL,
		"--auth-jwt-secret-file", r.secretFile)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = m.Stop(mcpdShutdown)
		}
	}()
	f, err := newTenantFleet(m.URL, r.secret, r.citusFleetTenants())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := &CitusMCPDResult{}
	n := r.cfg.CitusServers
	type target struct {
		tenant int // from 1, as Fleet counts
		id     uuid.UUID
	}
	targets := make([]target, n)
	r.log.Info("Citus row set through mcpd: registering", "engine", e.name, "servers", n, "callers", citusRegClients)
	cpu0 := e.pgCPU()
	res.Register = ClosedLoop(ctx, citusRegClients, 5*time.Minute, int64(n), func(ctx context.Context, seq int64) error {
		i := int(seq)
		t := i%r.cfg.CitusTenants + 1
		info := citusInfo(i)
		srv, _, err := f.Client(t).Register(ctx, apiwire.RegisterRequest{ModuleName: info.ModuleName, Version: info.Version,
			SupportedProtocols: info.SupportedProtocols, Skills: info.Skills}, "")
		if err != nil {
			return err
		}
		targets[i] = target{t, srv.ServerID}
		return nil
	})
	if res.Register.Calls > 0 {
		res.PGMicrosReg = (e.pgCPU() - cpu0) * 1e6 / float64(res.Register.Calls)
	}
	if res.Register.Errors > 0 || res.Register.Calls < int64(n) {
		return res, fmt.Errorf("%s: registered %d of %d servers through mcpd: %s", e.name,
			res.Register.Calls-res.Register.Errors, n, res.Register.FirstError)
	}
	heartbeat := func(ctx context.Context, seq int64) error {
		t := targets[seq%int64(n)]
		return f.heartbeat(ctx, t.tenant, t.id)
	}
	// Warm up, as the e2e rows: a heartbeat of every server (written, as
	// mcpd does not know them yet), then a second more, after which mcpd
	// answers them from memory.
	warm := ClosedLoop(ctx, citusSatClients, time.Minute, int64(n), heartbeat)
	if warm.Errors > 0 || warm.Calls < int64(n) {
		return res, fmt.Errorf("%s: warm-up heartbeats through mcpd: %d of %d, %s", e.name, warm.Calls-warm.Errors, n, warm.FirstError)
	}
	ClosedLoop(ctx, citusSatClients, time.Second, r.cfg.MaxCalls, heartbeat)
	flush0, _ := ReadFlushMetrics(ctx, m.Client, m.URL)
	phase := func(name string, clients int) (LoadResult, float64) {
		r.log.Info("Citus row set through mcpd: heartbeats", "engine", e.name, "load", name, "callers", clients, "duration", r.cfg.CitusDuration)
		cpu0 := e.pgCPU()
		lr := ClosedLoop(ctx, clients, r.cfg.CitusDuration, r.cfg.MaxCalls, heartbeat)
		// The flush under way at the loop's end is the load's.
		time.Sleep(2 * mcpdFlushInterval)
		pgUS := 0.0
		if lr.Calls > 0 {
			pgUS = (e.pgCPU() - cpu0) * 1e6 / float64(lr.Calls)
		}
		return lr, pgUS
	}
	res.Light, res.PGMicrosLight = phase("light", citusLightClients)
	res.Saturation, res.PGMicrosSat = phase("saturation", citusSatClients)
	if flush1, err := ReadFlushMetrics(ctx, m.Client, m.URL); err == nil {
		res.Flush = flush1.Since(flush0)
	}
	if text, err := readMetrics(ctx, m.Client, m.URL); err == nil {
		res.Sweeps = metricValue(text, "mcpd_sweep_duration_seconds_count")
		res.SweepFailures = metricValue(text, "mcpd_sweep_failures_total")
	}
	// SIGTERM writes the held heartbeats; the audit is complete after.
	stopped = true
	if err := m.Stop(mcpdShutdown); err != nil {
		r.log.Warn("stop mcpd", "err", err)
	}
	if err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = $1),
		count(*) FILTER (WHERE kind <> $1) FROM mcp_audit_events`, string(registry.KindRegistered)).
		Scan(&res.Registered, &res.Transitions); err != nil {
		return res, fmt.Errorf("%s: read the audit: %w", e.name, err)
	}
	return res, nil
}

// newTenantFleet is a Fleet of the given tenants (Fleet's tenant t is
// tenants[t-1]) at baseURL, with tokens signed by secret and no seeded
// servers.
func newTenantFleet(baseURL string, secret []byte, tenants []uuid.UUID) (*Fleet, error) {
	f := &Fleet{Tenants: len(tenants),
		hc:           &http.Client{Transport: NewTransport(), Timeout: 30 * time.Second},
		heartbeatURL: baseURL + "/v1/mcp/servers/heartbeat"}
	now := time.Now()
	for _, tenant := range tenants {
		tok, err := auth.Issue(secret, tenant, "mcpd-bench", auth.ScopeRead+" "+auth.ScopeWrite, 2*time.Hour, now)
		if err != nil {
			return nil, fmt.Errorf("issue token: %w", err)
		}
		f.clients = append(f.clients, client.New(baseURL, tok, client.WithHTTPClient(f.hc)))
		f.authz = append(f.authz, []string{"Bearer " + tok})
	}
	return f, nil
}

// metricValue is the sum of the samples of metric name (any labels) in the
// Prometheus text, 0 when there is none.
func metricValue(text []byte, name string) float64 {
	var sum float64
	for _, line := range bytes.Split(text, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte(name)) {
			continue
		}
		rest := line[len(name):]
		if len(rest) == 0 || (rest[0] != ' ' && rest[0] != '{') {
			continue // a longer name with this one as its prefix
		}
		sp := bytes.LastIndexByte(rest, ' ')
		if sp < 0 {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(string(rest[sp+1:]), &v); err == nil {
			sum += v
		}
	}
	return sum
}

// citusMCPDReport adds the rows through mcpd: each heartbeat load's ratio
// Citus ÷ plain against the issue's targets, the false transitions, and the
// registration's ratio and the CPU per heartbeat as information. err is
// why the rows could not be measured, if so.
func (r *runner) citusMCPDReport(plain, citus *CitusMCPDResult, err error) {
	n := groupThousands(float64(r.cfg.CitusServers))
	light := fmt.Sprintf("i. heartbeats/s through mcpd (held), Citus ÷ plain, light load (%d callers, %s servers of %d tenants)",
		citusLightClients, n, r.cfg.CitusTenants)
	sat := fmt.Sprintf("i. heartbeats/s through mcpd (held), Citus ÷ plain, saturation (%d callers)", citusSatClients)
	falseName := "i. false transitions through mcpd, Citus (plain)"
	if err == nil && (plain == nil || citus == nil) {
		err = errors.New("an engine's mcpd load did not run")
	}
	if err != nil {
		r.rep.fail("citus_mcpd_light", light, err)
		r.rep.fail("citus_mcpd_saturation", sat, err)
		r.rep.fail("citus_mcpd_false_transitions", falseName, err)
		return
	}
	for _, row := range citusMCPDRows(light, sat, falseName, n, *plain, *citus) {
		r.rep.add(row)
	}
}

// citusMCPDRows are the rows through mcpd of the two engines' results,
// judged.
func citusMCPDRows(light, sat, falseName, n string, plain, citus CitusMCPDResult) []Row {
	var rows []Row
	ratio := func(id, measure string, p, c LoadResult, target, pgP, pgC float64) {
		row := citusRatio(id, measure, p, c, target, pgP, pgC)
		if target > 0 && row.Verdict == "" && p.Errors+c.Errors > 0 {
			// A load with errors is no measure of the engine.
			row.Verdict = "FAIL"
			row.Ratio = row.Value / target
			row.Note = fmt.Sprintf("%d errors, first: %s; ", p.Errors+c.Errors, cmp.Or(p.FirstError, c.FirstError)) + row.Note
		}
		rows = append(rows, row)
	}
	ratio("citus_mcpd_light", light, plain.Light, citus.Light, targetCitusLight, plain.PGMicrosLight, citus.PGMicrosLight)
	ratio("citus_mcpd_saturation", sat, plain.Saturation, citus.Saturation, targetCitusSat, plain.PGMicrosSat, citus.PGMicrosSat)
	if plain.PGMicrosSat > 0 {
		rows = append(rows, Row{ID: "citus_mcpd_saturation_cpu",
			Measure: "i. PostgreSQL CPU per heartbeat through mcpd at saturation, Citus (3 nodes) ÷ plain",
			Value:   citus.PGMicrosSat / plain.PGMicrosSat, Unit: unitRatio, Basis: BasisCPU,
			Note: fmt.Sprintf("%.1f µs ÷ %.1f µs (light load: %.1f µs ÷ %.1f µs); a heartbeat held in memory costs PostgreSQL its share of a flush",
				citus.PGMicrosSat, plain.PGMicrosSat, citus.PGMicrosLight, plain.PGMicrosLight)})
	}
	false0 := Row{ID: "citus_mcpd_false_transitions", Measure: falseName,
		Value: float64(citus.Transitions), Unit: unitCount, Direction: AtMost, Verdict: "pass",
		Note: fmt.Sprintf("audit after the loads: %d on plain; monitor sweeps %.0f on Citus (%.0f failed), %.0f on plain (%.0f failed); "+
			"flush writes %.0f on Citus (%.0f failed, %.0f dropped), %.0f on plain (%.0f failed, %.0f dropped)",
			plain.Transitions, citus.Sweeps, citus.SweepFailures, plain.Sweeps, plain.SweepFailures,
			citus.Flush.WritesOK, citus.Flush.WritesError, citus.Flush.Dropped,
			plain.Flush.WritesOK, plain.Flush.WritesError, plain.Flush.Dropped)}
	if citus.Transitions+plain.Transitions > 0 || citus.Sweeps == 0 || citus.SweepFailures+plain.SweepFailures > 0 ||
		citus.Flush.WritesError+plain.Flush.WritesError+citus.Flush.Dropped+plain.Flush.Dropped > 0 {
		false0.Verdict = "FAIL"
	}
	rows = append(rows, false0)
	ratio("citus_mcpd_register", fmt.Sprintf("i. registrations/s through mcpd, Citus ÷ plain, %s servers, %d callers", n, citusRegClients),
		plain.Register, citus.Register, 0, plain.PGMicrosReg, citus.PGMicrosReg)
	for i := range rows {
		rows[i].judge()
	}
	return rows
}
