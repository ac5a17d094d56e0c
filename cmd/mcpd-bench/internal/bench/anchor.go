package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The anchors: what the same work costs the stack under mcpd, measured in
// the same run, so that mcpd's fleet figures read as ratios to a floor
// rather than as absolute figures of a shared machine.
//
//   - HTTP: a plain net/http server (AnchorHTTP) answering every request
//     200 with a small JSON body, in a process of its own, driven by the
//     same fleet driver at the same sizes: its CPU per request and its RSS
//     are the floor of mcpd's HTTP side at that shape.
//   - PostgreSQL: pgbench at the fleet's rates (-R), the one-row UPDATE of
//     the pgbench baseline, with clients to spare: PostgreSQL's CPU (and
//     WAL) per transaction at that rate is the floor of the database side.

// anchorBody is the plain server's answer: a server of about the shape of
// mcpd's heartbeat answer, with the status the fleet driver checks.
var anchorBody = []byte(`{"server_id":"6f1e1f7a-3c6a-4d5e-9b1a-2f0c8e7d6a51","tenant_id":"0b9c4e2d-7a15-4f3b-8e61-5d2a9c0f1e37",` +
	`"module_name":"module-1","version":"1.0.0","supported_protocols":["2025-06-18"],"status":"healthy",` +
	`"last_heartbeat_at":"2026-12-03T12:00:00.000000Z","registered_at":"2026-12-03T11:00:00Z",` +
	`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`)

// ServeAnchor serves the plain net/http anchor on addr until ctx ends:
// every request's body is read and answered 200 with anchorBody. Its
// settings are net/http's defaults, with mcpd's ReadHeaderTimeout.
func ServeAnchor(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(anchorBody)
	})}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// AnchorFlag is the mcpd-bench flag that makes it serve the anchor (with
// --listen) instead of running the harness.
const AnchorFlag = "-serve-anchor"

// StartAnchor starts this program (the harness's own binary) as the plain
// net/http anchor on a free loopback port, logging into dir.
func StartAnchor(ctx context.Context, dir, name string) (*MCPD, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return StartMCPDSpec(ctx, MCPDSpec{Path: self, Dir: dir, Name: name, Args: []string{AnchorFlag}})
}

// WAL is the database cluster's write-ahead log so far: pg_stat_wal's
// counters and the insert position, in bytes.
type WAL struct {
	Bytes   float64 `json:"wal_bytes"`
	Records int64   `json:"wal_records"`
	FPI     int64   `json:"wal_fpi"`
	LSN     int64   `json:"lsn_bytes"`
}

// ReadWAL reads pg_stat_wal and the WAL insert position.
func ReadWAL(ctx context.Context, admin *pgxpool.Pool) (WAL, error) {
	var w WAL
	err := admin.QueryRow(ctx, `SELECT wal_bytes::float8, wal_records, wal_fpi,
       (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint FROM pg_stat_wal`).Scan(&w.Bytes, &w.Records, &w.FPI, &w.LSN)
	return w, err
}

// Since is the WAL written from earlier to w.
func (w WAL) Since(earlier WAL) WAL {
	return WAL{Bytes: w.Bytes - earlier.Bytes, Records: w.Records - earlier.Records, FPI: w.FPI - earlier.FPI, LSN: w.LSN - earlier.LSN}
}

// anchorHTTP measures the net/http anchor at the fleet's size n.
func (r *runner) anchorHTTP(ctx context.Context, n int) {
	id := "anchor_http_" + strconv.Itoa(n)
	name := fmt.Sprintf("h0. anchor: plain net/http, %s connections, every 10 s", groupThousands(float64(n)))
	if why := FleetConnFits(n); why != "" {
		r.rep.skip(id, name, why)
		return
	}
	a, err := StartAnchor(ctx, r.work, "anchor-http-"+strconv.Itoa(n))
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	defer func() {
		if err := a.Stop(mcpdShutdown); err != nil {
			r.log.Warn("stop the anchor", "err", err)
		}
	}()
	r.log.Info("anchor: plain net/http", "connections", n, "duration", r.cfg.FleetDuration)
	load := loadavg()
	res, err := FleetConns(ctx, FleetConnOptions{BaseURL: a.URL, PID: a.PID(), PostmasterPID: r.pg.PID(), Secret: r.secret,
		Client: a.Client, Conns: n, Modules: r.cfg.Modules, Interval: fleetInterval, Jitter: fleetJitter,
		Duration: r.cfg.FleetDuration, MaxCalls: r.cfg.MaxCalls})
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	r.rep.Details[id] = map[string]any{"result": res, "loadavg_before": load, "loadavg_after": loadavg()}
	l := res.Load
	r.rep.add(Row{ID: id + "_cpu", Measure: name + ": CPU per request", Value: res.MCPDMicros, Unit: unitMicros,
		Note: fmt.Sprintf("CPU time; %.0f requests/s, %d errors, p50 / p99 %.2f / %.2f ms; load average %s; %s",
			l.Throughput, l.Errors, millis(l.P50), millis(l.P99), load, res.CPU.Describe("net/http"))})
	r.rep.add(Row{ID: id + "_rss", Measure: name + ": VmRSS, connections open", Value: mib(res.MemLoaded.RSS), Unit: unitMiB,
		Note: fmt.Sprintf("%.1f KiB per connection; before %.1f MiB; Go's default GC percent", res.RSSPerConn/1024, mib(res.MemBefore.RSS))})
}

// anchorPgbench measures pgbench's one-row UPDATE at rate transactions/s.
func (r *runner) anchorPgbench(ctx context.Context, rate int) {
	id := "anchor_pgbench_" + strconv.Itoa(rate)
	name := fmt.Sprintf("a0. anchor: pgbench 1-row UPDATE/commit at -R %d", rate)
	clients := max(4, rate/50) // at 1-2 ms a commit, far more than the rate needs
	d := max(r.cfg.PgbenchDuration, 10*time.Second)
	r.log.Info("anchor: pgbench at a rate", "rate", rate, "clients", clients, "duration", d)
	wal0, werr := ReadWAL(ctx, r.admin)
	cpu0 := TakeCPUSnapshot(0, r.pg.PID())
	kinds0, at0 := PostgresCPUByKind(r.pg.PID()), time.Now()
	res, err := PgbenchRun(ctx, r.pg, r.admin, r.work, PgbenchOptions{Servers: r.servers(), Clients: clients, Rate: rate, Duration: d})
	cpu := TakeCPUSnapshot(0, r.pg.PID()).Since(cpu0)
	seconds := time.Since(at0).Seconds()
	kinds := postgresCPUSince(PostgresCPUByKind(r.pg.PID()), kinds0, seconds)
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	res.CPU = cpu
	var wal WAL
	if werr == nil {
		var w1 WAL
		if w1, werr = ReadWAL(ctx, r.admin); werr == nil {
			wal = w1.Since(wal0)
		}
	}
	r.rep.Details[id] = map[string]any{"result": res, "wal": wal, "postgres_cores": kinds, "seconds": seconds, "duration_s": d.Seconds()}
	if res.TPS <= 0 {
		r.rep.fail(id, name, errors.New("pgbench committed nothing"))
		return
	}
	note := fmt.Sprintf("CPU time; %.0f transactions/s by %d clients, p50 / p99 %.2f / %.2f ms; %s",
		res.TPS, clients, millis(res.P50), millis(res.P99), cpu.Describe(""))
	r.rep.add(Row{ID: id + "_cpu_pg", Measure: name + ": PostgreSQL CPU per transaction", Value: cpu.Postgres / res.TPS * 1e6,
		Unit: unitMicros, Note: note})
	if werr == nil {
		tx := res.TPS * d.Seconds()
		r.rep.add(Row{ID: id + "_wal", Measure: name + ": WAL bytes per transaction", Value: float64(wal.LSN) / tx, Unit: unitBytes,
			Note: fmt.Sprintf("from the WAL insert position; pg_stat_wal: %.0f bytes, %.2f records and %.3f full-page images per transaction",
				wal.Bytes/tx, float64(wal.Records)/tx, float64(wal.FPI)/tx)})
	}
}

// anchors measures, before the fleet loads, pgbench at each fleet's rate
// and the net/http anchor at each fleet's size.
func (r *runner) anchors(ctx context.Context) {
	if !r.cfg.Anchors || len(r.cfg.Fleet) == 0 {
		return
	}
	for _, n := range r.cfg.Fleet {
		if FleetConnFits(n) == "" && n <= r.servers() {
			r.anchorPgbench(ctx, n/defaultIntervalSec)
		}
	}
	for _, n := range r.cfg.Fleet {
		r.anchorHTTP(ctx, n)
	}
}

// Targets of the fleet against its anchors (issue 31, with heartbeats
// held in memory; issue 24 set 1.5, 1.2 at 10,000 and 1.5).
const (
	targetVsHTTPCPU    = 1.3  // mcpd CPU per heartbeat ÷ net/http's per request
	targetVsHTTPRSS    = 1.2  // mcpd VmRSS ÷ net/http's, connections open
	targetVsPgbenchCPU = 0.25 // PostgreSQL CPU per heartbeat ÷ per pgbench transaction at the rate
	// targetFleetWAL: WAL bytes per heartbeat, a quarter of the 434 B
	// that one durable UPDATE per heartbeat wrote (bench-latest.json of
	// issue 30).
	targetFleetWAL = 434.0 / 4
)

// anchorRows adds the fleet load's ratios to its anchors, when they ran.
func (r *runner) anchorRows(id, name string, n int, res FleetConnResult) {
	if h, ok := r.rep.Details["anchor_http_"+strconv.Itoa(n)].(map[string]any); ok {
		if a, ok := h["result"].(FleetConnResult); ok && a.MCPDMicros > 0 {
			r.rep.add(Row{ID: id + "_vs_http_cpu", Measure: name + ": mcpd CPU per heartbeat ÷ plain net/http's per request",
				Value: res.MCPDMicros / a.MCPDMicros, Unit: unitRatio, Target: targetVsHTTPCPU, Direction: AtMost, Basis: BasisCPU,
				Note: fmt.Sprintf("%.0f µs ÷ %.0f µs, CPU time, same driver and shape", res.MCPDMicros, a.MCPDMicros)})
			rss := Row{ID: id + "_vs_http_rss", Measure: name + ": mcpd VmRSS ÷ plain net/http's, connections open",
				Value: float64(res.MemLoaded.RSS) / float64(a.MemLoaded.RSS), Unit: unitRatio, Basis: BasisMemory,
				Target: targetVsHTTPRSS, Direction: AtMost,
				Note: fmt.Sprintf("%.1f MiB ÷ %.1f MiB", mib(res.MemLoaded.RSS), mib(a.MemLoaded.RSS))}
			r.rep.add(rss)
		}
	}
	rate := n / defaultIntervalSec
	if p, ok := r.rep.Details["anchor_pgbench_"+strconv.Itoa(rate)].(map[string]any); ok {
		if pr, ok := p["result"].(PgbenchResult); ok && pr.TPS > 0 && res.PostgresMicros > 0 {
			per := pr.CPU.Postgres / pr.TPS * 1e6
			note := fmt.Sprintf("%.0f µs ÷ %.0f µs, CPU time", res.PostgresMicros, per)
			if kinds, ok := r.rep.Details[id+"_postgres_cores"].(map[string]float64); ok {
				window := res.Load.Elapsed.Seconds()
				if res.Load.Throughput > 0 {
					window = float64(res.Load.Calls) / res.Load.Throughput
				}
				note += "; mcpd: " + describePostgresCPU(kinds, res.Load.Calls, window)
			}
			kinds, ok1 := p["postgres_cores"].(map[string]float64)
			secs, ok2 := p["seconds"].(float64)
			runFor, ok3 := p["duration_s"].(float64)
			if ok1 && ok2 && ok3 {
				note += "; pgbench (its backends, gone at its end, under postmaster): " + describePostgresCPU(kinds, int64(pr.TPS*runFor), secs)
			}
			r.rep.add(Row{ID: id + "_vs_pgbench_cpu", Measure: fmt.Sprintf("%s: PostgreSQL CPU per heartbeat ÷ per pgbench transaction at -R %d", name, rate),
				Value: res.PostgresMicros / per, Unit: unitRatio, Target: targetVsPgbenchCPU, Direction: AtMost, Basis: BasisCPU,
				Note: note})
		}
	}
	if res.WAL.LSN > 0 && res.Load.Calls > 0 {
		note := fmt.Sprintf("measured window, from the WAL insert position; pg_stat_wal: %.0f bytes, %.2f records and %.3f full-page images per heartbeat",
			res.WAL.Bytes/float64(res.Load.Calls), float64(res.WAL.Records)/float64(res.Load.Calls), float64(res.WAL.FPI)/float64(res.Load.Calls))
		if stats, ok := r.rep.Details[id+"_wal_records"].([]WALRecordStat); ok {
			note += "; " + describeWALStats(stats, res.Load.Calls, 5)
		}
		r.rep.add(Row{ID: id + "_wal", Measure: name + ": WAL bytes per heartbeat", Value: float64(res.WAL.LSN) / float64(res.Load.Calls),
			Unit: unitBytes, Target: targetFleetWAL, Direction: AtMost, Note: note})
	}
}
