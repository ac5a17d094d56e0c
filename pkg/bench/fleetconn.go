package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/auth"
)

// The fleet's real shape: every MCP server is a process of its own with a
// connection of its own, heartbeating every interval. FleetConns simulates
// n of them against one mcpd: n TCP connections kept alive, each sending
// the heartbeat of one seeded server at its own phase of the interval, open
// loop (on schedule whatever the answers), with jitter.

// FleetConnOptions configures one fleet load.
type FleetConnOptions struct {
	// BaseURL is mcpd's (http://127.0.0.1:port); PID its process id, whose
	// CPU and memory are read.
	BaseURL string
	PID     int
	// PostmasterPID is PostgreSQL's, whose CPU is read.
	PostmasterPID int
	Secret        []byte
	// Conns simulated servers: seeded servers 1..Conns of a fleet of
	// Modules servers per tenant.
	Conns   int
	Modules int
	// Interval is each server's heartbeat interval; Jitter the share of it
	// by which each heartbeat is early or late, at random (0.05: +-5 %).
	Interval time.Duration
	Jitter   float64
	// Duration is how long the fleet heartbeats.
	Duration time.Duration
	// MaxCalls bounds the heartbeats.
	MaxCalls int64
}

// FleetConnResult is what one fleet load measured.
type FleetConnResult struct {
	Conns     int           `json:"conns"`
	Connected int           `json:"connected"`
	Interval  time.Duration `json:"interval_ns"`
	// ConnectTime is how long the first round took (each connection opened
	// at its phase of the first interval; wall clock).
	ConnectTime time.Duration `json:"connect_ns"`
	// Load: latencies from each heartbeat's due time (wall clock), errors
	// (failed calls and heartbeats never sent).
	Load LoadResult `json:"load"`
	// CPU is the cores used over the schedule's window; MCPDMicros and
	// PostgresMicros are CPU time per heartbeat sent in it.
	CPU            CPUUse  `json:"cpu"`
	MCPDMicros     float64 `json:"mcpd_cpu_us_per_heartbeat"`
	PostgresMicros float64 `json:"postgres_cpu_us_per_heartbeat"`
	// mcpd's memory: before the connections, after the first round, at the
	// end of the load (connections still open), and after they closed.
	MemBefore    Memory `json:"mem_before"`
	MemConnected Memory `json:"mem_connected"`
	MemLoaded    Memory `json:"mem_loaded"`
	MemClosed    Memory `json:"mem_closed"`
	// GoLoaded is mcpd's Go memory at MemLoaded (from its /metrics).
	GoLoaded map[string]float64 `json:"go_memory_loaded"`
	// RSSPerConn is (MemLoaded - MemBefore) / Connected, in bytes.
	RSSPerConn float64 `json:"rss_per_conn_bytes"`
}

// fleetAnswerLimit bounds the answer read of one heartbeat.
const fleetAnswerLimit = 64 << 10

// FleetConnFits reports why n connections cannot be opened under this
// process's open-file limit (the driver's side; mcpd's is the same limit
// on this machine), or "" when they can.
func FleetConnFits(n int) string {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return ""
	}
	const reserve = 1024 // the harness's own files, pools and mcpd's reserve
	if uint64(n)+reserve > lim.Max {
		return fmt.Sprintf("the open-file limit (ulimit -Hn) is %d: %s connections need as many descriptors in the driver and in mcpd, plus about %d",
			lim.Max, groupThousands(float64(n)), reserve)
	}
	return ""
}

// FleetConns runs the fleet load of opts.
func FleetConns(ctx context.Context, opts FleetConnOptions) (FleetConnResult, error) {
	res := FleetConnResult{Conns: opts.Conns, Interval: opts.Interval}
	if opts.Conns < 1 || opts.Interval <= 0 || opts.Duration <= 0 {
		return res, errors.New("fleet load: no connections, interval or duration")
	}
	host := strings.TrimPrefix(opts.BaseURL, "http://")
	tenants := (opts.Conns + opts.Modules - 1) / opts.Modules
	authz := make([]string, tenants)
	now := time.Now()
	for t := range authz {
		tok, err := auth.Issue(opts.Secret, TenantID(t+1), "mcpd-bench", auth.ScopeRead+" "+auth.ScopeWrite, 2*time.Hour, now)
		if err != nil {
			return res, fmt.Errorf("issue token: %w", err)
		}
		authz[t] = tok
	}
	var err error
	if res.MemBefore, err = ReadMemory(opts.PID); err != nil {
		return res, err
	}

	// Each server connects at its phase of a first interval and sends its
	// first heartbeat at once (mcpd gives a new connection
	// ReadHeaderTimeout for its first request); that round warms up and is
	// not measured but for its errors. The measured window is the
	// Duration after it.
	ctx, cancel := context.WithTimeout(ctx, opts.Interval+opts.Duration+loadDrain)
	defer cancel()
	conns := make([]*fleetConn, opts.Conns)
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	for i := range conns {
		n := i + 1 // the seeded server's number
		conns[i] = &fleetConn{host: host, dialer: dialer,
			request: heartbeatRequest(host, authz[(n-1)/opts.Modules], ServerID(n).String())}
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	var (
		rec       recorder
		calls     atomic.Int64
		connected atomic.Int64
		scheduled atomic.Int64 // heartbeats due within the window
		wg        sync.WaitGroup
		warm      sync.WaitGroup
	)
	start := time.Now()
	begin := start.Add(opts.Interval) // the measured window
	end := begin.Add(opts.Duration)
	jitter := time.Duration(opts.Jitter * float64(opts.Interval))
	sleepUntil := func(t time.Time) {
		if wait := time.Until(t); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
	}
	warm.Add(len(conns))
	for i, c := range conns {
		seed := uint64(i)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, 0x6d637064))
			phase := time.Duration(rng.Int64N(int64(opts.Interval)))
			sleepUntil(start.Add(phase))
			err := c.heartbeat(ctx)
			if err == nil {
				connected.Add(1)
			} else {
				rec.fail(fmt.Errorf("first heartbeat: %w", err))
			}
			warm.Done()
			lat := make([]time.Duration, 0, int(opts.Duration/opts.Interval)+2)
			for k := 1; ; k++ {
				due := start.Add(phase + time.Duration(k)*opts.Interval)
				if jitter > 0 {
					due = due.Add(time.Duration(rng.Int64N(int64(2*jitter+1))) - jitter)
				}
				if due.Before(begin) {
					due = begin
				}
				if !due.Before(end) {
					break
				}
				scheduled.Add(1)
				if calls.Add(1) > opts.MaxCalls {
					rec.fail(errors.New("-max-calls reached"))
					continue
				}
				sleepUntil(due)
				if ctx.Err() != nil {
					rec.fail(ctx.Err())
					continue
				}
				if err := c.heartbeat(ctx); err != nil {
					rec.fail(err)
					continue
				}
				lat = append(lat, time.Since(due))
			}
			rec.add(lat)
		})
	}
	warm.Wait()
	res.ConnectTime = time.Since(start)
	res.Connected = int(connected.Load())
	sleepUntil(begin)
	res.MemConnected, _ = ReadMemory(opts.PID)
	// CPU over the measured window, not the drain after it.
	cpu0 := TakeCPUSnapshot(opts.PID, opts.PostmasterPID)
	sleepUntil(end)
	cpu := TakeCPUSnapshot(opts.PID, opts.PostmasterPID).Since(cpu0)
	window := time.Since(begin)
	wg.Wait()
	res.MemLoaded, _ = ReadMemory(opts.PID)
	res.GoLoaded = goMemory(ctx, opts.BaseURL)
	res.Load = rec.result(res.Conns, window)
	res.Load.OfferedRate = float64(res.Conns) / opts.Interval.Seconds()
	res.CPU = cpu
	res.MCPDMicros, res.PostgresMicros = cpu.PerCall(scheduled.Load(), window)
	if res.Connected > 0 {
		res.RSSPerConn = float64(res.MemLoaded.RSS-res.MemBefore.RSS) / float64(res.Connected)
	}
	for _, c := range conns {
		c.close()
	}
	time.Sleep(time.Second)
	res.MemClosed, _ = ReadMemory(opts.PID)
	return res, nil
}

// heartbeatRequest is the whole HTTP/1.1 request of one server's heartbeat.
func heartbeatRequest(host, token, serverID string) []byte {
	body := `{"server_id":"` + serverID + `"}`
	return []byte("POST /v1/mcp/servers/heartbeat HTTP/1.1\r\nHost: " + host +
		"\r\nAuthorization: Bearer " + token + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// fleetConn is one simulated server's connection.
type fleetConn struct {
	host    string
	dialer  *net.Dialer
	request []byte
	conn    net.Conn
	br      *bufio.Reader
	buf     bytes.Buffer
}

func (c *fleetConn) dial(ctx context.Context) error {
	conn, err := c.dialer.DialContext(ctx, "tcp", c.host)
	if err != nil {
		return err
	}
	c.conn = conn
	if c.br == nil {
		c.br = bufio.NewReaderSize(conn, 2048)
	} else {
		c.br.Reset(conn)
	}
	return nil
}

func (c *fleetConn) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// heartbeat sends the request and checks the answer: 200, a healthy
// server. A connection that fails is closed and opened again for the next
// heartbeat.
func (c *fleetConn) heartbeat(ctx context.Context) error {
	if c.conn == nil {
		if err := c.dial(ctx); err != nil {
			return err
		}
	}
	err := c.exchange()
	if err != nil {
		c.close()
	}
	return err
}

func (c *fleetConn) exchange() error {
	_ = c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.conn.Write(c.request); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return err
	}
	c.buf.Reset()
	_, err = io.Copy(&c.buf, io.LimitReader(resp.Body, fleetAnswerLimit))
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heartbeat: %s: %.200s", resp.Status, bytes.TrimSpace(c.buf.Bytes()))
	}
	if !bytes.Contains(c.buf.Bytes(), healthyStatus) {
		return fmt.Errorf("heartbeat: answer without a healthy status: %.200s", c.buf.Bytes())
	}
	if resp.Close {
		c.close()
	}
	return nil
}

// ParkFleet makes servers 1..n of the seeded fleet healthy and fresh
// (heartbeating now), and every other server unhealthy, which the sweep
// does not read: a monitor at the real interval then sees the n servers
// only. ResetFleet undoes it. It returns the audit trail's last sequence
// number, from which FalseTransitions counts.
func ParkFleet(ctx context.Context, admin *pgxpool.Pool, n int) (int64, error) {
	if _, err := admin.Exec(ctx, `
UPDATE mcp_servers SET
    status = CASE WHEN server_id IN (SELECT md5('server' || g)::uuid FROM generate_series(1, $1::int) g)
             THEN 'healthy' ELSE 'unhealthy' END,
    last_heartbeat_at = now(), deregistered_at = NULL`, n); err != nil {
		return 0, fmt.Errorf("park the fleet: %w", err)
	}
	if err := analyze(ctx, admin); err != nil {
		return 0, err
	}
	var seq int64
	err := admin.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM mcp_audit_events`).Scan(&seq)
	return seq, err
}

// FreshenFleet sets the heartbeat of every healthy server (the parked
// fleet's) to now.
func FreshenFleet(ctx context.Context, admin *pgxpool.Pool) error {
	_, err := admin.Exec(ctx, `UPDATE mcp_servers SET last_heartbeat_at = now() WHERE status = 'healthy'`)
	return err
}

// FalseTransitions counts the audit events to degraded or unhealthy after
// sequence number since: of a fleet that heartbeats on time, every one is
// false.
func FalseTransitions(ctx context.Context, admin *pgxpool.Pool, since int64) (int64, error) {
	var n int64
	err := admin.QueryRow(ctx, `SELECT count(*) FROM mcp_audit_events
WHERE seq > $1 AND to_status IN ('degraded', 'unhealthy')`, since).Scan(&n)
	return n, err
}

// Targets of the fleet loads (docs/performance.md, "Fleet shape").
const (
	// fleetInterval is each simulated server's heartbeat interval: the
	// default, so that the rate is the real fleet's (n / 10 s).
	fleetInterval = defaultIntervalSec * time.Second
	// fleetJitter: each heartbeat early or late by up to 5 % of it.
	fleetJitter = 0.05
	// targetFleetCPURatio bounds mcpd's CPU per heartbeat at the fleet's
	// shape against its figure at saturation (the closed loop).
	targetFleetCPURatio = 2
	targetFleetP999     = 20 * time.Millisecond
)

// h. the fleet's shape: n servers, each its own connection, at the real
// interval, against an mcpd whose monitor runs at that interval too.
func (r *runner) fleet(ctx context.Context) {
	for _, n := range r.cfg.Fleet {
		r.fleetLoad(ctx, n)
	}
	if len(r.cfg.Fleet) > 0 && r.admin != nil {
		if err := ResetFleet(ctx, r.admin, r.seededAt); err != nil {
			r.rep.fail("fleet_reset", "h. reset the fleet after the fleet loads", err)
		}
	}
}

func (r *runner) fleetLoad(ctx context.Context, n int) {
	id := "fleet_" + strconv.Itoa(n)
	name := fmt.Sprintf("h. fleet of %s servers, one connection each, every 10 s", groupThousands(float64(n)))
	if why := FleetConnFits(n); why != "" {
		r.rep.skip(id, name, why)
		return
	}
	if n > r.servers() {
		r.rep.skip(id, name, fmt.Sprintf("needs %d seeded servers, -tenants x -modules is %d", n, r.servers()))
		return
	}
	if r.mcpdBin == "" {
		r.rep.skip(id, name, "no mcpd binary")
		return
	}
	mark, err := ParkFleet(ctx, r.admin, n)
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	m, err := StartMCPD(ctx, r.mcpdBin, r.work, "mcpd-fleet-"+strconv.Itoa(n), "--database-url", r.appURL,
		"--auth-jwt-secret-file", r.secretFile, "--heartbeat-interval", fleetInterval.String())
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	defer func() {
		if err := m.Stop(mcpdShutdown); err != nil {
			r.log.Warn("stop mcpd", "err", err)
		}
	}()
	if err := FreshenFleet(ctx, r.admin); err != nil {
		r.rep.fail(id, name, err)
		return
	}
	r.log.Info("fleet load", "servers", n, "interval", fleetInterval, "duration", r.cfg.FleetDuration)
	load := loadavg()
	res, err := FleetConns(ctx, FleetConnOptions{BaseURL: m.URL, PID: m.PID(), PostmasterPID: r.pg.PID(), Secret: r.secret,
		Conns: n, Modules: r.cfg.Modules, Interval: fleetInterval, Jitter: fleetJitter, Duration: r.cfg.FleetDuration,
		MaxCalls: r.cfg.MaxCalls})
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	falseTr, ferr := FalseTransitions(ctx, r.admin, mark)
	r.rep.Details[id] = map[string]any{"result": res, "false_transitions": falseTr, "loadavg_before": load, "loadavg_after": loadavg()}
	l := res.Load
	r.rep.add(Row{ID: id, Measure: name + ": heartbeats/s", Value: l.Throughput, Unit: unitPerSecond,
		Note: fmt.Sprintf("offered %.0f/s by %d connections (opened over a first round of %.1f s, not measured); load average %s; %s",
			l.OfferedRate, res.Connected, res.ConnectTime.Seconds(), load, res.CPU.Describe("mcpd"))})
	cpuRow := Row{ID: id + "_cpu_mcpd", Measure: name + ": mcpd CPU per heartbeat", Value: res.MCPDMicros, Unit: unitMicros,
		Note: "CPU time; target: twice the closed loop's (saturation) figure"}
	if sat, ok := r.rep.Details["e2e_closed_cpu"].(CPUUse); ok {
		if closed, ok := r.rep.Details["e2e_closed"].(LoadResult); ok && closed.Calls > 0 {
			satUS, _ := sat.PerCall(closed.Calls, closed.Elapsed)
			cpuRow.Target, cpuRow.Direction = targetFleetCPURatio*satUS, AtMost
		}
	}
	r.rep.add(cpuRow)
	r.rep.add(Row{ID: id + "_cpu_pg", Measure: name + ": PostgreSQL CPU per heartbeat", Value: res.PostgresMicros, Unit: unitMicros})
	r.rep.add(Row{ID: id + "_p99", Measure: name + ": p99", Value: millis(l.P99), Unit: unitMillis,
		Note: fmt.Sprintf("p50 %.2f ms (wall clock, from the time each heartbeat was due)", millis(l.P50))})
	r.rep.add(Row{ID: id + "_p999", Measure: name + ": p99.9", Value: millis(l.P999), Unit: unitMillis,
		Target: millis(targetFleetP999), Direction: AtMost, Note: fmt.Sprintf("max %.2f ms", millis(l.Max))})
	r.rep.add(Row{ID: id + "_rss", Measure: name + ": mcpd VmRSS, connections open", Value: mib(res.MemLoaded.RSS), Unit: unitMiB,
		Target: targetRSSMiB, Direction: AtMost,
		Note: fmt.Sprintf("%.1f KiB per connection; before %.1f MiB, connected %.1f MiB, closed %.1f MiB, VmHWM %.1f MiB; Go heap in use %.1f MiB, stacks %.1f MiB",
			res.RSSPerConn/1024, mib(res.MemBefore.RSS), mib(res.MemConnected.RSS), mib(res.MemClosed.RSS), mib(res.MemLoaded.HWM),
			res.GoLoaded["heap_inuse_bytes"]/(1<<20), res.GoLoaded["stack_inuse_bytes"]/(1<<20))})
	verdict := func(bad bool) string {
		if bad {
			return "FAIL"
		}
		return "pass"
	}
	errNote := fmt.Sprintf("of %d heartbeats", l.Calls)
	if l.FirstError != "" {
		errNote += "; first: " + l.FirstError
	}
	r.rep.add(Row{ID: id + "_errors", Measure: name + ": errors", Value: float64(l.Errors), Unit: unitCount,
		Verdict: verdict(l.Errors > 0), Note: errNote})
	if ferr != nil {
		r.rep.fail(id+"_false", name+": false transitions", ferr)
		return
	}
	r.rep.add(Row{ID: id + "_false", Measure: name + ": false transitions (audit events to degraded or unhealthy)",
		Value: float64(falseTr), Unit: unitCount, Verdict: verdict(falseTr > 0), Note: "must be 0"})
}

// goMemory reads the Go runtime's memory figures that mcpd's /metrics
// exports (its heap, its goroutines' stacks, its goroutines), by name
// without the go_memstats_ prefix; empty when /metrics does not answer.
func goMemory(ctx context.Context, baseURL string) map[string]float64 {
	out := map[string]float64{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return out
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes",
			"go_memstats_next_gc_bytes", "go_memstats_sys_bytes", "go_goroutines":
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				out[strings.TrimPrefix(name, "go_memstats_")] = v
			}
		}
	}
	return out
}
