package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
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
	// BaseURL is mcpd's (http://127.0.0.1:port, https:// with TLS); PID
	// its process id, whose CPU and memory are read.
	BaseURL string
	PID     int
	// PostmasterPID is PostgreSQL's, whose CPU is read.
	PostmasterPID int
	Secret        []byte
	// Client reaches BaseURL for its /metrics (nil: http.DefaultClient).
	Client *http.Client
	// Conns simulated servers: seeded servers 1..Conns of a fleet of
	// Modules servers per tenant.
	Conns   int
	Modules int
	// Interval is each server's heartbeat interval; Jitter the share of it
	// by which each heartbeat is early or late, at random (0.05: +-5 %).
	Interval time.Duration
	Jitter   float64
	// Duration is how long the fleet heartbeats in the measured window.
	Duration time.Duration
	// MaxCalls bounds the heartbeats.
	MaxCalls int64
	// TLS, when set, makes every connection TLS with this configuration,
	// each with a session cache of its own, as each server's process has.
	TLS *tls.Config
	// Rounds follow the measured window, one interval each.
	Rounds []FleetRound
	// ReadWAL, when set, reads the database's WAL at the measured
	// window's start and end.
	ReadWAL func(context.Context) (WAL, error)
	// ReadFlush, when set, reads mcpd's counters of held heartbeats at the
	// measured window's start and FlushSettle after its end (the last
	// window's flush committed).
	ReadFlush   func(context.Context) (FlushMetrics, error)
	FlushSettle time.Duration
	// Window, when set, is called at the measured window's start (true)
	// and end (false): a CPU profile of that window, say.
	Window func(start bool)
}

// FleetRound is one interval after the measured window, in which every
// server heartbeats once more.
type FleetRound struct {
	Name string
	// Reconnect closes each connection before its heartbeat of the round:
	// it connects again (over TLS, resuming its session).
	Reconnect bool
	// Restart, when set, runs at the round's start: it restarts mcpd and
	// returns the new process's id. Every server then finds its connection
	// closed at its heartbeat of the round and connects again.
	Restart func(ctx context.Context) (pid int, err error)
}

// FleetRoundResult is what the connect round or one FleetRound measured.
type FleetRoundResult struct {
	Name string `json:"name"`
	// Load: latencies from each heartbeat's due time (wall clock).
	Load LoadResult `json:"load"`
	// CPU over the round; per heartbeat due in it. After a restart mcpd's
	// is the new process's from its start (the old one's shutdown is not
	// counted).
	CPU            CPUUse  `json:"cpu"`
	MCPDMicros     float64 `json:"mcpd_cpu_us_per_heartbeat"`
	PostgresMicros float64 `json:"postgres_cpu_us_per_heartbeat"`
	// Connects are the connections opened in the round; Resumed of them
	// resumed a TLS session (no certificate, no key exchange signature).
	Connects int64 `json:"connects"`
	Resumed  int64 `json:"resumed"`
	// Retries are heartbeats sent again after their connection failed (a
	// closed keep-alive connection, a refused connection while mcpd was
	// down).
	Retries int64 `json:"retries"`
	// RestartTime is how long the restart took, until /readyz (wall clock).
	RestartTime time.Duration `json:"restart_ns,omitempty"`
	// Mem is mcpd's memory at the round's end.
	Mem Memory `json:"mem"`
}

// FleetConnResult is what one fleet load measured.
type FleetConnResult struct {
	Conns     int           `json:"conns"`
	Connected int           `json:"connected"`
	Interval  time.Duration `json:"interval_ns"`
	TLS       bool          `json:"tls"`
	// ConnectTime is how long the first round took (each connection opened
	// at its phase of the first interval; wall clock).
	ConnectTime time.Duration `json:"connect_ns"`
	// Connect is the first round, not part of the measured window: every
	// server connecting (over TLS, a full handshake) and heartbeating.
	Connect FleetRoundResult `json:"connect_round"`
	// Load: latencies from each heartbeat's due time (wall clock), errors
	// (failed calls and heartbeats never sent).
	Load LoadResult `json:"load"`
	// CPU is the cores used over the schedule's window; MCPDMicros and
	// PostgresMicros are CPU time per heartbeat sent in it.
	CPU            CPUUse  `json:"cpu"`
	MCPDMicros     float64 `json:"mcpd_cpu_us_per_heartbeat"`
	PostgresMicros float64 `json:"postgres_cpu_us_per_heartbeat"`
	// Connects and Retries in the measured window (0 when keep-alive
	// holds).
	Connects int64 `json:"connects"`
	Retries  int64 `json:"retries"`
	// mcpd's memory: before the connections, after the first round, at the
	// end of the measured window (connections still open), and after they
	// closed (at the end of the rounds).
	MemBefore    Memory `json:"mem_before"`
	MemConnected Memory `json:"mem_connected"`
	MemLoaded    Memory `json:"mem_loaded"`
	MemClosed    Memory `json:"mem_closed"`
	// GoLoaded is mcpd's Go memory at MemLoaded (from its /metrics).
	GoLoaded map[string]float64 `json:"go_memory_loaded"`
	// RSSPerConn is (MemLoaded - MemBefore) / Connected, in bytes.
	RSSPerConn float64 `json:"rss_per_conn_bytes"`
	// Rounds are the results of opts.Rounds.
	Rounds []FleetRoundResult `json:"rounds,omitempty"`
	// WAL is what the database wrote in the measured window (opts.ReadWAL).
	WAL WAL `json:"wal"`
	// WALStart and WALEnd are the WAL insert positions at the window's
	// start and end (bytes), for pg_waldump.
	WALStart int64 `json:"wal_start_lsn"`
	WALEnd   int64 `json:"wal_end_lsn"`
	// Flush is what mcpd's held heartbeats counted over the measured
	// window (opts.ReadFlush); FlushErr why it could not be read.
	Flush    FlushMetrics `json:"flush"`
	FlushErr string       `json:"flush_error,omitempty"`
}

// fleetAnswerLimit bounds the answer read of one heartbeat.
const fleetAnswerLimit = 64 << 10

// fleetRetryWait is the pause before a heartbeat is sent again on a new
// connection after a connection could not be opened; a keep-alive
// connection found closed is replaced at once (as net/http's transport
// does).
const fleetRetryWait = 100 * time.Millisecond

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

// fleetSegment gathers one part of a fleet load: the connect round (0),
// the measured window (1), each round after it (2, ...).
type fleetSegment struct {
	rec       recorder
	scheduled atomic.Int64
	connects  atomic.Int64
	resumed   atomic.Int64
	retries   atomic.Int64
}

// FleetConns runs the fleet load of opts.
func FleetConns(ctx context.Context, opts FleetConnOptions) (FleetConnResult, error) {
	res := FleetConnResult{Conns: opts.Conns, Interval: opts.Interval, TLS: opts.TLS != nil}
	if opts.Conns < 1 || opts.Interval <= 0 || opts.Duration <= 0 {
		return res, errors.New("fleet load: no connections, interval or duration")
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || u.Host == "" {
		return res, fmt.Errorf("fleet load: base URL %q", opts.BaseURL)
	}
	host := u.Host
	if opts.Client == nil {
		opts.Client = http.DefaultClient
	}
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
	pid := opts.PID
	if res.MemBefore, err = ReadMemory(pid); err != nil {
		return res, err
	}

	// Each server connects at its phase of a first interval and sends its
	// first heartbeat at once (mcpd gives a new connection
	// ReadHeaderTimeout for its first request); that round warms up and is
	// not part of the measured window, which starts after a settling
	// interval. Each round is one more interval, and a settling one.
	rounds := len(opts.Rounds)
	ctx, cancel := context.WithTimeout(ctx, 2*opts.Interval*time.Duration(1+rounds)+opts.Duration+loadDrain)
	defer cancel()
	conns := make([]*fleetConn, opts.Conns)
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	for i := range conns {
		n := i + 1 // the seeded server's number
		conns[i] = &fleetConn{host: host, dialer: dialer,
			request: heartbeatRequest(host, authz[(n-1)/opts.Modules], ServerID(n).String())}
		if opts.TLS != nil {
			conns[i].tls = opts.TLS.Clone()
			conns[i].tls.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			conns[i].tls.NextProtos = []string{"http/1.1"}
			if conns[i].tls.ServerName == "" {
				conns[i].tls.ServerName = u.Hostname()
			}
		}
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	// Segments: the connect round, the measured window, each round, and
	// the settling intervals between them (one shared segment, not
	// measured): a backlog of one part does not spill into the next.
	settle := 2 + rounds
	segs := make([]*fleetSegment, settle+1)
	for i := range segs {
		segs[i] = &fleetSegment{}
	}
	var (
		calls     atomic.Int64
		connected atomic.Int64
		wg        sync.WaitGroup
		warm      sync.WaitGroup
	)
	start := time.Now()
	begin := start.Add(2 * opts.Interval) // the measured window
	end := begin.Add(opts.Duration)
	roundStart := func(r int) time.Time { return end.Add(time.Duration(2*r) * opts.Interval) }
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
			lat := make([][]time.Duration, len(segs))
			reconnected := -1 // the last round in which the connection was reopened
			for k := 0; ; k++ {
				due := start.Add(phase + time.Duration(k)*opts.Interval)
				seg := 0
				if k > 0 {
					if jitter > 0 {
						due = due.Add(time.Duration(rng.Int64N(int64(2*jitter+1))) - jitter)
					}
					switch {
					case due.Before(begin):
						seg = settle
					case due.Before(end):
						seg = 1
					default:
						r := int(due.Sub(end) / (2 * opts.Interval))
						if r >= rounds {
							break
						}
						seg = settle
						if due.Before(roundStart(r).Add(opts.Interval)) {
							seg = 2 + r
							if opts.Rounds[r].Reconnect && reconnected < r {
								reconnected = r
								c.close()
							}
						}
					}
					if seg == 0 { // past the last round
						break
					}
				}
				s := segs[seg]
				s.scheduled.Add(1)
				if calls.Add(1) > opts.MaxCalls {
					s.rec.fail(errors.New("-max-calls reached"))
					continue
				}
				sleepUntil(due)
				if ctx.Err() != nil {
					s.rec.fail(ctx.Err())
				} else if err := c.heartbeatRetrying(ctx, s, due.Add(opts.Interval)); err != nil {
					if k == 0 {
						err = fmt.Errorf("first heartbeat: %w", err)
					}
					s.rec.fail(err)
				} else {
					lat[seg] = append(lat[seg], time.Since(due))
					if k == 0 {
						connected.Add(1)
					}
				}
				if k == 0 {
					warm.Done()
				}
			}
			for i, l := range lat {
				segs[i].rec.add(l)
			}
		})
	}
	// CPU and memory are read at the boundaries; latencies and counts are
	// gathered when every heartbeat has ended.
	// The connect round's CPU is read when its interval is over and every
	// first heartbeat has ended, whichever is later.
	cpu0 := TakeCPUSnapshot(pid, opts.PostmasterPID)
	warm.Wait()
	res.ConnectTime = time.Since(start)
	res.Connected = int(connected.Load())
	sleepUntil(start.Add(opts.Interval))
	connectCPU := TakeCPUSnapshot(pid, opts.PostmasterPID).Since(cpu0)
	connectSpan := max(res.ConnectTime, opts.Interval)
	res.MemConnected, _ = ReadMemory(pid)
	sleepUntil(begin)
	cpu1 := TakeCPUSnapshot(pid, opts.PostmasterPID)
	var wal0 WAL
	walErr := errors.New("not read")
	if opts.ReadWAL != nil {
		wal0, walErr = opts.ReadWAL(ctx)
	}
	if opts.Window != nil {
		opts.Window(true)
	}
	var flush0 FlushMetrics
	flushErr := errors.New("not read")
	if opts.ReadFlush != nil {
		flush0, flushErr = opts.ReadFlush(ctx)
	}

	// CPU over the measured window, not the drain after it.
	sleepUntil(end)
	cpu := TakeCPUSnapshot(pid, opts.PostmasterPID).Since(cpu1)
	if opts.Window != nil {
		opts.Window(false)
	}
	if walErr == nil {
		if wal1, err := opts.ReadWAL(ctx); err == nil {
			res.WAL = wal1.Since(wal0)
			res.WALStart, res.WALEnd = wal0.LSN, wal1.LSN
		}
	}
	window := time.Since(begin)
	res.MemLoaded, _ = ReadMemory(pid)
	res.GoLoaded = goMemory(ctx, opts.Client, opts.BaseURL)
	if opts.ReadFlush != nil {
		if flushErr == nil {
			sleepUntil(end.Add(opts.FlushSettle))
			var f1 FlushMetrics
			if f1, flushErr = opts.ReadFlush(ctx); flushErr == nil {
				res.Flush = f1.Since(flush0)
			}
		}
		if flushErr != nil {
			res.FlushErr = flushErr.Error()
		}
	}
	res.Rounds = make([]FleetRoundResult, rounds)
	for r, round := range opts.Rounds {
		rr := &res.Rounds[r]
		sleepUntil(roundStart(r))
		from := TakeCPUSnapshot(pid, opts.PostmasterPID)
		if round.Restart != nil {
			t0 := time.Now()
			next, err := round.Restart(ctx)
			if err != nil {
				cancel()
				wg.Wait()
				return res, fmt.Errorf("fleet round %q: %w", round.Name, err)
			}
			rr.RestartTime = time.Since(t0)
			pid, from.server = next, 0 // the new process's CPU from its start
		}
		sleepUntil(roundStart(r).Add(opts.Interval))
		rr.CPU = TakeCPUSnapshot(pid, opts.PostmasterPID).Since(from)
		rr.Mem, _ = ReadMemory(pid)
	}
	wg.Wait()
	res.Connect = segs[0].result("connect", opts.Conns, connectCPU, connectSpan)
	res.Connect.Mem = res.MemConnected
	for r, round := range opts.Rounds {
		rr := &res.Rounds[r]
		got := segs[2+r].result(round.Name, opts.Conns, rr.CPU, opts.Interval)
		got.RestartTime, got.Mem = rr.RestartTime, rr.Mem
		*rr = got
	}
	m := segs[1]
	res.Load = m.rec.result(res.Conns, window)
	res.Load.OfferedRate = float64(res.Conns) / opts.Interval.Seconds()
	res.CPU = cpu
	res.MCPDMicros, res.PostgresMicros = cpu.PerCall(m.scheduled.Load(), window)
	res.Connects, res.Retries = m.connects.Load(), m.retries.Load()
	if res.Connected > 0 {
		res.RSSPerConn = float64(res.MemLoaded.RSS-res.MemBefore.RSS) / float64(res.Connected)
	}
	for _, c := range conns {
		c.close()
	}
	time.Sleep(time.Second)
	res.MemClosed, _ = ReadMemory(pid)
	return res, nil
}

// result is the segment's figures over a window of length elapsed with
// cpu used in it.
func (s *fleetSegment) result(name string, conns int, cpu CPUUse, elapsed time.Duration) FleetRoundResult {
	r := FleetRoundResult{Name: name, Load: s.rec.result(conns, elapsed), CPU: cpu,
		Connects: s.connects.Load(), Resumed: s.resumed.Load(), Retries: s.retries.Load()}
	r.MCPDMicros, r.PostgresMicros = cpu.PerCall(s.scheduled.Load(), elapsed)
	return r
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
	tls     *tls.Config // nil: plain TCP
	request []byte
	conn    net.Conn
	br      *bufio.Reader
	buf     bytes.Buffer
}

// errAnswer is a heartbeat that got an answer other than a healthy 200:
// sending it again would not change it.
type errAnswer struct{ msg string }

func (e *errAnswer) Error() string { return e.msg }

func (c *fleetConn) dial(ctx context.Context, seg *fleetSegment) error {
	conn, err := c.dialer.DialContext(ctx, "tcp", c.host)
	if err != nil {
		return err
	}
	if c.tls != nil {
		tc := tls.Client(conn, c.tls)
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = conn.Close()
			return fmt.Errorf("TLS handshake: %w", err)
		}
		if tc.ConnectionState().DidResume {
			seg.resumed.Add(1)
		}
		conn = tc
	}
	seg.connects.Add(1)
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

// heartbeatRetrying sends the heartbeat until it is answered or deadline
// passes: a keep-alive connection that fails is replaced at once, a
// connection that cannot be opened is tried again after fleetRetryWait.
// An answer other than a healthy 200 is not sent again.
func (c *fleetConn) heartbeatRetrying(ctx context.Context, seg *fleetSegment, deadline time.Time) error {
	for {
		reused := c.conn != nil
		err := c.heartbeat(ctx, seg)
		var answer *errAnswer
		if err == nil || errors.As(err, &answer) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		seg.retries.Add(1)
		if !reused {
			select {
			case <-time.After(fleetRetryWait):
			case <-ctx.Done():
				return err
			}
		}
	}
}

// heartbeat sends the request and checks the answer: 200, a healthy
// server. A connection that fails is closed and opened again for the next
// heartbeat.
func (c *fleetConn) heartbeat(ctx context.Context, seg *fleetSegment) error {
	if c.conn == nil {
		if err := c.dial(ctx, seg); err != nil {
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
		return &errAnswer{fmt.Sprintf("heartbeat: %s: %.200s", resp.Status, bytes.TrimSpace(c.buf.Bytes()))}
	}
	if !bytes.Contains(c.buf.Bytes(), healthyStatus) {
		return &errAnswer{fmt.Sprintf("heartbeat: answer without a healthy status: %.200s", c.buf.Bytes())}
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
// interval, against an mcpd whose monitor runs at that interval too; then
// the same over TLS.
func (r *runner) fleet(ctx context.Context) {
	for _, n := range r.cfg.Fleet {
		r.fleetLoad(ctx, n, false)
	}
	r.profileFleet(ctx)
	for _, n := range r.cfg.FleetTLS {
		r.fleetLoad(ctx, n, true)
	}
	if len(r.cfg.Fleet)+len(r.cfg.FleetTLS) > 0 && r.admin != nil {
		if err := ResetFleet(ctx, r.admin, r.seededAt); err != nil {
			r.rep.fail("fleet_reset", "h. reset the fleet after the fleet loads", err)
		}
	}
}

// profileFleet profiles, in process, the largest plain fleet load that
// ran: where mcpd's CPU per heartbeat goes at the fleet's shape.
func (r *runner) profileFleet(ctx context.Context) {
	if r.cfg.ProfileDir == "" || r.mcpdBin == "" {
		return
	}
	n := 0
	for _, size := range r.cfg.Fleet {
		if FleetConnFits(size) == "" && size <= r.servers() {
			n = max(n, size)
		}
	}
	if n == 0 {
		return
	}
	const id = "profile_fleet"
	name := fmt.Sprintf("profile: in-process mcpd, fleet of %s servers, one connection each, every 10 s (profiler on)", groupThousands(float64(n)))
	if _, err := ParkFleet(ctx, r.admin, n); err != nil {
		r.rep.fail(id, name, err)
		return
	}
	if err := FreshenFleet(ctx, r.admin); err != nil {
		r.rep.fail(id, name, err)
		return
	}
	r.log.Info("profiling the fleet load in process", "servers", n, "dir", r.cfg.ProfileDir)
	path, res, err := ProfileFleet(ctx, r.appURL, r.secretFile, r.cfg.ProfileDir, FleetConnOptions{
		PostmasterPID: r.pg.PID(), Secret: r.secret, Conns: n, Modules: r.cfg.Modules, Interval: fleetInterval,
		Jitter: fleetJitter, Duration: r.cfg.FleetDuration, MaxCalls: r.cfg.MaxCalls})
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	r.rep.Details[id] = map[string]any{"result": res, "cpu_profile": path}
	r.rep.add(Row{ID: id, Measure: name + ": heartbeats/s", Value: res.Load.Throughput, Unit: unitPerSecond,
		Note: fmt.Sprintf("CPU profile of the measured window in %s (mcpd's goroutines: -tagfocus side=server); %d errors", path, res.Load.Errors)})
}

// targetFleetTLSCPURatio bounds mcpd's CPU per heartbeat of the fleet over
// TLS against the same fleet's in plain TCP.
const targetFleetTLSCPURatio = 1.5

func (r *runner) fleetLoad(ctx context.Context, n int, withTLS bool) {
	id := "fleet_" + strconv.Itoa(n)
	name := fmt.Sprintf("h. fleet of %s servers, one connection each, every 10 s", groupThousands(float64(n)))
	plainID := id
	if withTLS {
		id = "fleet_tls_" + strconv.Itoa(n)
		name = fmt.Sprintf("h. fleet of %s servers over TLS, one connection each, every 10 s", groupThousands(float64(n)))
	}
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
	spec := MCPDSpec{Path: r.mcpdBin, Dir: r.work, Name: "mcpd-" + strings.ReplaceAll(id, "_", "-"),
		Args: []string{"--database-url", r.appURL, "--auth-jwt-secret-file", r.secretFile,
			"--heartbeat-interval", fleetInterval.String()}}
	if withTLS {
		cert, key, client, err := WriteServerCertificate(r.work)
		if err != nil {
			r.rep.fail(id, name, err)
			return
		}
		spec.Args = append(spec.Args, "--tls-cert-file", cert, "--tls-key-file", key)
		spec.TLS = client
	}
	m, err := StartMCPDSpec(ctx, spec)
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
	opts := FleetConnOptions{BaseURL: m.URL, PID: m.PID(), PostmasterPID: r.pg.PID(), Secret: r.secret, Client: m.Client,
		Conns: n, Modules: r.cfg.Modules, Interval: fleetInterval, Jitter: fleetJitter, Duration: r.cfg.FleetDuration,
		MaxCalls: r.cfg.MaxCalls, TLS: spec.TLS,
		ReadWAL: func(ctx context.Context) (WAL, error) { return ReadWAL(ctx, r.admin) }}
	var (
		pgKinds0, pgKinds map[string]float64
		pgAt0             time.Time
	)
	opts.Window = func(start bool) {
		if start {
			pgKinds0, pgAt0 = PostgresCPUByKind(r.pg.PID()), time.Now()
			return
		}
		pgKinds = postgresCPUSince(PostgresCPUByKind(r.pg.PID()), pgKinds0, time.Since(pgAt0).Seconds())
	}
	if !withTLS {
		// Over TLS the rounds start at the window's end: its flush
		// counters would count theirs too.
		opts.ReadFlush = func(ctx context.Context) (FlushMetrics, error) { return ReadFlushMetrics(ctx, m.Client, m.URL) }
		opts.FlushSettle = 2 * mcpdFlushInterval
	}
	if withTLS {
		opts.Rounds = []FleetRound{
			{Name: "resume", Reconnect: true},
			{Name: "restart", Restart: func(ctx context.Context) (int, error) {
				if err := m.Restart(ctx, mcpdShutdown); err != nil {
					return 0, err
				}
				return m.PID(), nil
			}},
		}
	}
	r.log.Info("fleet load", "servers", n, "tls", withTLS, "interval", fleetInterval, "duration", r.cfg.FleetDuration)
	load := loadavg()
	res, err := FleetConns(ctx, opts)
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	falseTr, ferr := FalseTransitions(ctx, r.admin, mark)
	r.rep.Details[id] = map[string]any{"result": res, "false_transitions": falseTr, "loadavg_before": load, "loadavg_after": loadavg()}
	r.rep.Details[id+"_postgres_cores"] = pgKinds
	if res.WALEnd > res.WALStart {
		if stats, err := WALRecordStats(ctx, r.pg, res.WALStart, res.WALEnd); err != nil {
			r.rep.Details[id+"_wal_records_error"] = err.Error()
		} else {
			r.rep.Details[id+"_wal_records"] = stats
		}
	}
	r.fleetRows(id, name, res, load)
	cpuRow := Row{ID: id + "_cpu_mcpd", Measure: name + ": mcpd CPU per heartbeat", Value: res.MCPDMicros, Unit: unitMicros,
		Note: "CPU time; target: twice the closed loop's (saturation) figure"}
	if withTLS {
		cpuRow.Note = "CPU time; target: 1.5 times the same fleet's in plain TCP"
		if plain, ok := r.rep.Details[plainID].(map[string]any); ok {
			if pr, ok := plain["result"].(FleetConnResult); ok && pr.MCPDMicros > 0 {
				cpuRow.Target, cpuRow.Direction = targetFleetTLSCPURatio*pr.MCPDMicros, AtMost
			}
		}
	} else if sat, ok := r.rep.Details["e2e_closed_cpu"].(CPUUse); ok {
		if closed, ok := r.rep.Details["e2e_closed"].(LoadResult); ok && closed.Calls > 0 {
			satUS, _ := sat.PerCall(closed.Calls, closed.Elapsed)
			cpuRow.Target, cpuRow.Direction = targetFleetCPURatio*satUS, AtMost
		}
	}
	r.rep.add(cpuRow)
	r.rep.add(Row{ID: id + "_cpu_pg", Measure: name + ": PostgreSQL CPU per heartbeat", Value: res.PostgresMicros, Unit: unitMicros})
	if !withTLS {
		r.anchorRows(id, name, n, res)
		if res.FlushErr != "" {
			r.rep.fail(id+"_flush", name+": the flush window", errors.New(res.FlushErr))
		} else {
			r.flushRows(id, name, res.Flush, res.Load.Calls)
		}
	}
	l := res.Load
	r.rep.add(Row{ID: id + "_p99", Measure: name + ": p99", Value: millis(l.P99), Unit: unitMillis,
		Note: fmt.Sprintf("p50 %.2f ms (wall clock, from the time each heartbeat was due)", millis(l.P50))})
	r.rep.add(Row{ID: id + "_p999", Measure: name + ": p99.9", Value: millis(l.P999), Unit: unitMillis,
		Target: millis(targetFleetP999), Direction: AtMost, Note: fmt.Sprintf("max %.2f ms", millis(l.Max))})
	rss := Row{ID: id + "_rss", Measure: name + ": mcpd VmRSS, connections open", Value: mib(res.MemLoaded.RSS), Unit: unitMiB,
		Note: fmt.Sprintf("%.1f KiB per connection; before %.1f MiB, connected %.1f MiB, closed %.1f MiB, VmHWM %.1f MiB; Go heap in use %.1f MiB, stacks %.1f MiB",
			res.RSSPerConn/1024, mib(res.MemBefore.RSS), mib(res.MemConnected.RSS), mib(res.MemClosed.RSS), mib(res.MemLoaded.HWM),
			res.GoLoaded["heap_inuse_bytes"]/(1<<20), res.GoLoaded["stack_inuse_bytes"]/(1<<20))}
	if !withTLS {
		rss.Target, rss.Direction = targetRSSMiB, AtMost
	}
	r.rep.add(rss)
	if withTLS {
		r.fleetRoundRows(id, name, res)
	}
	verdict := func(bad bool) string {
		if bad {
			return "FAIL"
		}
		return "pass"
	}
	errs, calls, first := l.Errors, l.Calls, l.FirstError
	for _, round := range append([]FleetRoundResult{res.Connect}, res.Rounds...) {
		errs, calls = errs+round.Load.Errors, calls+round.Load.Calls
		if first == "" {
			first = round.Load.FirstError
		}
	}
	errNote := fmt.Sprintf("of %d heartbeats (every round); %d sent again on a new connection in the measured window", calls, res.Retries)
	if first != "" {
		errNote += "; first: " + first
	}
	r.rep.add(Row{ID: id + "_errors", Measure: name + ": errors", Value: float64(errs), Unit: unitCount,
		Verdict: verdict(errs > 0), Note: errNote})
	if ferr != nil {
		r.rep.fail(id+"_false", name+": false transitions", ferr)
		return
	}
	r.rep.add(Row{ID: id + "_false", Measure: name + ": false transitions (audit events to degraded or unhealthy)",
		Value: float64(falseTr), Unit: unitCount, Verdict: verdict(falseTr > 0), Note: "must be 0"})
}

// fleetRows adds the fleet load's throughput row.
func (r *runner) fleetRows(id, name string, res FleetConnResult, load string) {
	l := res.Load
	r.rep.add(Row{ID: id, Measure: name + ": heartbeats/s", Value: l.Throughput, Unit: unitPerSecond,
		Note: fmt.Sprintf("offered %.0f/s by %d connections (opened over a first round of %.1f s, not measured); load average %s; %s",
			l.OfferedRate, res.Connected, res.ConnectTime.Seconds(), load, res.CPU.Describe("mcpd"))})
}

// fleetRoundRows adds the rows of the TLS fleet's rounds: the first
// connections (full handshakes), reconnections resuming their sessions,
// and mcpd restarted (every server connecting again within an interval).
func (r *runner) fleetRoundRows(id, name string, res FleetConnResult) {
	describe := func(rr FleetRoundResult) string {
		s := fmt.Sprintf("%d connections opened, %d of them resumed; PostgreSQL %.0f µs per heartbeat; p50 / p99 / max %.2f / %.2f / %.2f ms from the due time; %d errors, %d sent again",
			rr.Connects, rr.Resumed, rr.PostgresMicros, millis(rr.Load.P50), millis(rr.Load.P99), millis(rr.Load.Max),
			rr.Load.Errors, rr.Retries)
		if rr.RestartTime > 0 {
			s += fmt.Sprintf("; the restart took %.2f s", rr.RestartTime.Seconds())
		}
		return s + fmt.Sprintf("; mcpd VmRSS %.1f MiB at the round's end", mib(rr.Mem.RSS))
	}
	type roundRow struct {
		suffix, what string
		rr           FleetRoundResult
	}
	rows := []roundRow{{"_connect", "first connections (a full handshake each, within one interval)", res.Connect}}
	for _, rr := range res.Rounds {
		switch rr.Name {
		case "resume":
			rows = append(rows, roundRow{"_resume", "every server reconnecting within one interval, resuming its session", rr})
		case "restart":
			rows = append(rows, roundRow{"_restart", "mcpd restarted: every server reconnecting within one interval (full handshakes)", rr})
		}
	}
	for _, row := range rows {
		r.rep.add(Row{ID: id + row.suffix, Measure: name + ": " + row.what + ": mcpd CPU per heartbeat", Value: row.rr.MCPDMicros,
			Unit: unitMicros, Note: "CPU time; " + describe(row.rr)})
	}
}

// goMemory reads the Go runtime's memory figures that mcpd's /metrics
// exports (its heap, its goroutines' stacks, its goroutines), by name
// without the go_memstats_ prefix; empty when /metrics does not answer.
func goMemory(ctx context.Context, hc *http.Client, baseURL string) map[string]float64 {
	out := map[string]float64{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return out
	}
	resp, err := hc.Do(req)
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
