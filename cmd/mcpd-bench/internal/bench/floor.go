package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/registry"
)

// The floor (issue 31): a plain net/http handler doing the per-request work
// of a heartbeat that mcpd answers from memory, with no store at all: the
// bearer token checked (HS256, by pkg/auth's Verifier with mcpd's default
// options, its cache of verified tokens included), the body decoded
// ({"server_id"}), the heartbeat written into a map under a mutex, and a
// server of the shape mcpd answers encoded as JSON. Driven closed loop by
// the same clients for the same time as mcpd's closed loop, its
// heartbeats/s are what mcpd could reach on this machine if holding a
// heartbeat cost nothing beyond HTTP, JWT and JSON.

// FloorFlag is the mcpd-bench flag that makes it serve the floor (with
// --listen and FloorSecretFlag) instead of running the harness.
const FloorFlag = "-serve-floor"

// FloorSecretFlag names the HS256 secret file the floor verifies tokens
// with.
const FloorSecretFlag = "-floor-secret-file"

// floorHeartbeatPath is the path the floor answers heartbeats on; any
// other path is answered 200 (the harness's /readyz).
const floorHeartbeatPath = "/v1/mcp/servers/heartbeat"

// floorServer is the template of the floor's answer: a seeded server's
// fields (seed.go), as mcpd answers a heartbeat.
func floorServer() registry.Server {
	at := time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	return registry.Server{ModuleName: "module-1", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
		CapabilityAdvertisement: json.RawMessage(`{}`), Status: registry.StatusHealthy, RegisteredAt: at,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", HeartbeatIntervalSecs: mcpdHeartbeatInterval.Seconds(), Remotes: []registry.Remote{}}
}

// floorHandler is the floor's handler over verifier.
func floorHandler(verifier *auth.Verifier) http.Handler {
	var (
		mu    sync.Mutex
		beats = make(map[uuid.UUID]time.Time)
	)
	template := floorServer()
	ready := []byte(`{"status":"ready"}`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != floorHeartbeatPath {
			_, _ = w.Write(ready)
			return
		}
		tok, ok := auth.BearerToken(r.Header.Get("Authorization"))
		if !ok {
			http.Error(w, `{"title":"no bearer token"}`, http.StatusUnauthorized)
			return
		}
		claims, err := verifier.Verify(tok)
		if err != nil || !claims.CanWrite() {
			http.Error(w, `{"title":"bad token"}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			ServerID string `json:"server_id"`
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, `{"title":"malformed body"}`, http.StatusBadRequest)
			return
		}
		id, err := uuid.Parse(req.ServerID)
		if err != nil {
			http.Error(w, `{"title":"server_id"}`, http.StatusBadRequest)
			return
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		mu.Lock()
		beats[id] = now
		mu.Unlock()
		srv := template
		srv.ServerID, srv.TenantID, srv.LastHeartbeatAt = id, claims.TenantID, now
		b, err := json.Marshal(srv)
		if err != nil {
			http.Error(w, `{"title":"encode"}`, http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(b)
	})
}

// ServeFloor serves the floor on addr until ctx ends, verifying tokens with
// the HS256 secret in secretFile. Its settings are net/http's defaults,
// with mcpd's ReadHeaderTimeout.
func ServeFloor(ctx context.Context, addr, secretFile string) error {
	secret, err := auth.ReadSecretFile(secretFile)
	if err != nil {
		return err
	}
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: floorHandler(verifier)}
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

// StartFloor starts this program (the harness's own binary) as the floor
// on a free loopback port, verifying tokens with secretFile, logging into
// dir.
func StartFloor(ctx context.Context, dir, name, secretFile string) (*MCPD, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return StartMCPDSpec(ctx, MCPDSpec{Path: self, Dir: dir, Name: name, Args: []string{FloorFlag, FloorSecretFlag, secretFile}})
}

// Target of the closed loop against the floor (issue 31).
const targetVsFloor = 0.85

// floor measures the floor closed loop, as mcpd's closed loop was
// measured (closed), and adds the ratio of the two.
func (r *runner) floor(ctx context.Context, closed LoadResult, mcpdCPU CPUUse) {
	const id, name = "floor", "b0. the floor: plain net/http, HS256 check, JSON in and out, a map write, no store"
	f, err := StartFloor(ctx, r.work, "floor", r.secretFile)
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	defer func() {
		if err := f.Stop(mcpdShutdown); err != nil {
			r.log.Warn("stop the floor", "err", err)
		}
	}()
	fleet, err := NewFleet(f.URL, r.secret, r.cfg.Tenants, r.cfg.Modules)
	if err != nil {
		r.rep.fail(id, name, err)
		return
	}
	defer fleet.Close()
	ClosedLoop(ctx, r.cfg.Clients, time.Second, r.cfg.MaxCalls, fleet.Heartbeat)
	r.log.Info("closed-loop heartbeats against the floor", "clients", r.cfg.Clients, "duration", r.cfg.Duration)
	cpu0 := TakeCPUSnapshot(f.PID(), 0)
	res := ClosedLoop(ctx, r.cfg.Clients, r.cfg.Duration, r.cfg.MaxCalls, fleet.Heartbeat)
	cpu := TakeCPUSnapshot(f.PID(), 0).Since(cpu0)
	mem, _ := ReadMemory(f.PID())
	r.rep.Details["floor"] = map[string]any{"load": res, "cpu": cpu, "memory": mem}
	if res.Throughput == 0 {
		r.rep.fail(id, name, fmt.Errorf("no heartbeat succeeded: %s", res.FirstError))
		return
	}
	floorUS, _ := cpu.PerCall(res.Calls, res.Elapsed)
	r.rep.add(Row{ID: id, Measure: fmt.Sprintf("%s: heartbeats/s, closed loop, %d clients", name, r.cfg.Clients),
		Value: res.Throughput, Unit: unitPerSecond,
		Note: fmt.Sprintf("a separate process driven as mcpd's closed loop; p50 / p99 / p99.9 %.2f / %.2f / %.2f ms, %d errors; %s; Go's default GC percent",
			millis(res.P50), millis(res.P99), millis(res.P999), res.Errors, cpu.Describe("floor"))})
	r.rep.add(Row{ID: id + "_cpu", Measure: name + ": CPU per heartbeat", Value: floorUS, Unit: unitMicros})
	note := "throughput on the same 2 cores, driver included: wall clock"
	if mcpdUS, _ := mcpdCPU.PerCall(closed.Calls, closed.Elapsed); mcpdUS > 0 && floorUS > 0 {
		note += fmt.Sprintf("; CPU per heartbeat mcpd %.0f µs ÷ floor %.0f µs = %.2fx", mcpdUS, floorUS, mcpdUS/floorUS)
	}
	r.rep.add(Row{ID: "e2e_vs_floor", Measure: "b÷b0. mcpd heartbeats/s ÷ the floor's, closed loop",
		Value: closed.Throughput / res.Throughput, Unit: unitRatio, Target: targetVsFloor, Direction: AtLeast,
		Basis: BasisWall, Note: note})
}

// FlushMetrics are mcpd's counters of held heartbeats (its /metrics).
type FlushMetrics struct {
	// WritesOK and WritesError are the flushes' store calls (one per
	// tenant per window); Heartbeats those written; Dropped those a failed
	// flush could not keep.
	WritesOK    float64 `json:"writes_ok"`
	WritesError float64 `json:"writes_error"`
	Heartbeats  float64 `json:"heartbeats"`
	Dropped     float64 `json:"dropped"`
	// Answered is mcpd_heartbeats_total{result="ok"}: every heartbeat
	// answered 200, held or written before it was answered.
	Answered float64 `json:"answered"`
	// Lag is the histogram of the flush lag: cumulative counts by upper
	// bound in seconds, and the count of flushes.
	LagBounds []float64 `json:"lag_bounds"`
	LagCounts []float64 `json:"lag_counts"`
	LagCount  float64   `json:"lag_count"`
}

// Since is what m counted after earlier.
func (m FlushMetrics) Since(earlier FlushMetrics) FlushMetrics {
	d := FlushMetrics{WritesOK: m.WritesOK - earlier.WritesOK, WritesError: m.WritesError - earlier.WritesError,
		Heartbeats: m.Heartbeats - earlier.Heartbeats, Dropped: m.Dropped - earlier.Dropped,
		Answered: m.Answered - earlier.Answered, LagBounds: m.LagBounds, LagCount: m.LagCount - earlier.LagCount}
	d.LagCounts = make([]float64, len(m.LagCounts))
	for i, c := range m.LagCounts {
		d.LagCounts[i] = c
		if i < len(earlier.LagCounts) {
			d.LagCounts[i] -= earlier.LagCounts[i]
		}
	}
	return d
}

// PerWrite is the heartbeats written per successful store call.
func (m FlushMetrics) PerWrite() float64 {
	if m.WritesOK <= 0 {
		return 0
	}
	return m.Heartbeats / m.WritesOK
}

// LagQuantile is quantile q of the flush lag, in seconds, interpolated
// linearly within its bucket as Prometheus's histogram_quantile does, and
// the bucket's upper bound; 0, 0 when no flush was observed. Past the last
// finite bound it is that bound (and +Inf).
func (m FlushMetrics) LagQuantile(q float64) (value, bound float64) {
	if m.LagCount <= 0 || len(m.LagBounds) == 0 {
		return 0, 0
	}
	rank := q * m.LagCount
	lower, below := 0.0, 0.0
	for i, ub := range m.LagBounds {
		c := m.LagCounts[i]
		if c >= rank {
			if c == below {
				return ub, ub
			}
			return lower + (ub-lower)*(rank-below)/(c-below), ub
		}
		lower, below = ub, c
	}
	last := m.LagBounds[len(m.LagBounds)-1]
	return last, math.Inf(1)
}

// ParseFlushMetrics reads the held heartbeats' counters out of mcpd's
// /metrics text.
func ParseFlushMetrics(text []byte) FlushMetrics {
	var m FlushMetrics
	for _, line := range bytes.Split(text, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		sp := bytes.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		name, raw := string(line[:sp]), string(line[sp+1:])
		var v float64
		if _, err := fmt.Sscan(raw, &v); err != nil {
			continue
		}
		switch {
		case name == `mcpd_heartbeat_flush_writes_total{result="ok"}`:
			m.WritesOK = v
		case name == `mcpd_heartbeat_flush_writes_total{result="error"}`:
			m.WritesError = v
		case name == `mcpd_heartbeat_flush_heartbeats_total`:
			m.Heartbeats = v
		case name == `mcpd_heartbeat_flush_dropped_total`:
			m.Dropped = v
		case name == `mcpd_heartbeats_total{result="ok"}`:
			m.Answered = v
		case name == `mcpd_heartbeat_flush_lag_seconds_count`:
			m.LagCount = v
		case bytes.HasPrefix(line, []byte(`mcpd_heartbeat_flush_lag_seconds_bucket{le="`)):
			le := name[len(`mcpd_heartbeat_flush_lag_seconds_bucket{le="`):]
			le = le[:max(0, len(le)-2)] // `"}`
			if le == "+Inf" {
				continue
			}
			var ub float64
			if _, err := fmt.Sscan(le, &ub); err == nil {
				m.LagBounds = append(m.LagBounds, ub)
				m.LagCounts = append(m.LagCounts, v)
			}
		}
	}
	return m
}

// ReadFlushMetrics reads the held heartbeats' counters from the /metrics
// of the mcpd at baseURL.
func ReadFlushMetrics(ctx context.Context, hc *http.Client, baseURL string) (FlushMetrics, error) {
	text, err := readMetrics(ctx, hc, baseURL)
	if err != nil {
		return FlushMetrics{}, err
	}
	m := ParseFlushMetrics(text)
	if len(m.LagBounds) == 0 {
		return m, errors.New("mcpd's /metrics has no mcpd_heartbeat_flush_lag_seconds: heartbeats are not held")
	}
	return m, nil
}

// readMetrics is the text of the /metrics of the mcpd at baseURL.
func readMetrics(ctx context.Context, hc *http.Client, baseURL string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 8<<20))
}

// The flush window's targets: the lag's p99 at most two windows of mcpd's
// default 500 ms, a window inside the sweep's grace for held heartbeats
// (three windows, lifecycle.SweepGrace), on which "no false transition
// from the window" rests.
const (
	mcpdFlushInterval = 500 * time.Millisecond
	targetFlushLagP99 = 2 * mcpdFlushInterval
)

// flushRows adds the flush window's rows of a load that m counted, of
// calls heartbeats answered.
func (r *runner) flushRows(id, name string, m FlushMetrics, calls int64) {
	note := fmt.Sprintf("%.0f heartbeats written by %.0f store calls (%.0f failed, %.0f dropped)",
		m.Heartbeats, m.WritesOK+m.WritesError, m.WritesError, m.Dropped)
	if calls > 0 {
		note += fmt.Sprintf("; the load sent %d heartbeats (%.0f answered 200 by mcpd's count), a flush writes the latest per server per window",
			calls, m.Answered)
	}
	r.rep.add(Row{ID: id + "_flush_per_write", Measure: name + ": heartbeats per flush statement", Value: m.PerWrite(),
		Unit: unitCount, Basis: BasisCount, Note: note + "; one statement per tenant per window"})
	p99, bound := m.LagQuantile(0.99)
	r.rep.add(Row{ID: id + "_flush_lag_p99", Measure: name + ": flush lag p99 (oldest heartbeat's age at its commit)",
		Value: p99 * 1000, Unit: unitMillis, Target: millis(targetFlushLagP99), Direction: AtMost, Basis: BasisWall,
		Note: fmt.Sprintf("%.0f flushes; interpolated in the histogram's bucket ≤ %g s; target: two windows of %v (the sweep's grace is three)",
			m.LagCount, bound, mcpdFlushInterval)})
}
