package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/daemon"
)

// fairClient calls one daemon as one tenant.
type fairClient struct {
	http  *http.Client
	base  string
	token string
}

func (c *fairClient) post(ctx context.Context, path string, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func (c *fairClient) register(t *testing.T, module string) uuid.UUID {
	t.Helper()
	code, body, err := c.post(t.Context(), "/v1/mcp/servers/register", map[string]any{
		"module_name": module, "version": "1.0.0", "supported_protocols": []string{"2025-06-18"}})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("register %s: %d %s %v", module, code, body, err)
	}
	var srv struct {
		ServerID uuid.UUID `json:"server_id"`
	}
	if err := json.Unmarshal(body, &srv); err != nil {
		t.Fatal(err)
	}
	return srv.ServerID
}

// p99 of samples (which it sorts).
func p99(samples []time.Duration) time.Duration {
	slices.Sort(samples)
	return samples[(len(samples)*99)/100]
}

// The fairness settings: both tenants may make rate requests per second;
// the quiet tenant heartbeats at quietRate, the flooding one sends ten
// times its limit.
const (
	fairRate       = 100
	quietRate      = 80
	floodRate      = 10 * fairRate
	fairPhase      = 200 * time.Millisecond
	fairPhasePairs = 20
	fairFloodLead  = 50 * time.Millisecond
	fairAttempts   = 5
)

// One tenant flooding at ten times its rate limit neither fails nor slows
// another tenant's heartbeats: the quiet tenant sees no refusal, and its
// p99 with the flood stays within twice its p99 alone. Short phases
// alternate (alone, flood, alone, flood, ...) so that the machine's own
// noise (other processes on a shared host) falls on both sides alike; the
// ratio is retried up to five times, refusals never. The ratio is asserted
// without the race detector on a host that is not overloaded; otherwise it
// is reported.
func TestTenantFloodDoesNotHurtAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time load test")
	}
	secret := bytes.Repeat([]byte("f"), 32)
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := devConfig()
	cfg.AuthJWTSecretFile = secretFile
	cfg.TenantRateLimit, cfg.TenantRateBurst = fairRate, fairRate
	cfg.LogLevel = "warn"
	d := start(t, cfg, daemon.Options{})

	// Each tenant has connections of its own, as separate clients would.
	newClient := func() *fairClient {
		tok, err := auth.Issue(secret, uuid.New(), "fairness", "mcp:read mcp:write", time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}
		t.Cleanup(tr.CloseIdleConnections)
		return &fairClient{http: &http.Client{Transport: tr, Timeout: 5 * time.Second}, base: "http://" + d.Addr(), token: tok}
	}
	quiet, flood := newClient(), newClient()
	var quietServers []uuid.UUID
	for i := range 20 {
		quietServers = append(quietServers, quiet.register(t, fmt.Sprintf("quiet-%02d", i)))
	}
	floodServer := flood.register(t, "flood")

	// heartbeats sends the quiet tenant's heartbeats at quietRate for a
	// phase and returns their latencies; any answer but 200 fails the test.
	heartbeats := func(ctx context.Context) []time.Duration {
		n := int(fairPhase.Seconds() * quietRate)
		out := make([]time.Duration, 0, n)
		start := time.Now()
		for i := range n {
			if wait := time.Until(start.Add(time.Duration(i) * time.Second / quietRate)); wait > 0 {
				time.Sleep(wait)
			}
			t0 := time.Now()
			code, body, err := quiet.post(ctx, "/v1/mcp/servers/heartbeat", map[string]string{"server_id": quietServers[i%len(quietServers)].String()})
			if err != nil || code != http.StatusOK {
				t.Fatalf("quiet tenant's heartbeat %d: %d %s %v", i, code, body, err)
			}
			out = append(out, time.Since(t0))
		}
		return out
	}
	// The flood comes from a process of its own, as from another client
	// host: its CPU and garbage are not the daemon's.
	flooder := startFlooder(t, flood, floodServer)
	// Warm up: the flooder's connections, the daemon's heap.
	flooder.set(t, true)
	time.Sleep(300 * time.Millisecond)
	flooder.set(t, false)
	flooder.counts(t)
	quiet.post(t.Context(), "/v1/mcp/servers/heartbeat", map[string]string{"server_id": quietServers[0].String()}) // warm
	attempts := fairAttempts
	if raceEnabled {
		attempts = 1 // reported only (below): one attempt says it
	}
	var ratio float64
	for attempt := 1; attempt <= attempts; attempt++ {
		var alone, flooded []time.Duration
		var ms0 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		for range fairPhasePairs {
			alone = append(alone, heartbeats(t.Context())...)
			flooder.set(t, true)
			time.Sleep(fairFloodLead) // the flood has used its burst
			flooded = append(flooded, heartbeats(t.Context())...)
			flooder.set(t, false)
		}
		counts := flooder.counts(t)
		var ms1 runtime.MemStats
		runtime.ReadMemStats(&ms1)
		pa, pf := p99(alone), p99(flooded)
		ratio = float64(pf) / float64(pa)
		floodSecs := float64(fairPhasePairs) * (fairPhase + fairFloodLead).Seconds()
		t.Logf("attempt %d: quiet tenant p99 alone %s (median %s), under a flood %s (median %s), ratio %.2f, %d samples each; "+
			"flooding tenant %.0f/s sent, %d allowed (%.0f/s), %d refused 429, %d other; %d GC cycles, %s paused",
			attempt, pa.Round(time.Microsecond), alone[len(alone)/2].Round(time.Microsecond),
			pf.Round(time.Microsecond), flooded[len(flooded)/2].Round(time.Microsecond), ratio, len(alone),
			float64(counts.OK+counts.Limited+counts.Other)/floodSecs, counts.OK, float64(counts.OK)/floodSecs,
			counts.Limited, counts.Other, ms1.NumGC-ms0.NumGC, time.Duration(ms1.PauseTotalNs-ms0.PauseTotalNs))
		if counts.Other != 0 {
			t.Fatalf("the flooding tenant got %d answers that were neither 200 nor 429", counts.Other)
		}
		if counts.Limited == 0 {
			t.Fatal("the flooding tenant was never refused")
		}
		if ratio <= 2 {
			return
		}
	}
	if raceEnabled {
		// Every call costs several times its CPU under the race detector,
		// the flood's refusals on both sides (the flooder is this binary
		// too) included: on 2 cores that is a load of its own.
		t.Logf("race detector on: the p99 ratio %.2f is reported, not asserted (run without -race to assert it)", ratio)
		return
	}
	if load, ok := overloaded(); ok {
		// On a host with more runnable threads than twice its CPUs, the
		// tail is the host's: the daemon's threads are preempted (its GC
		// pauses above grow from well under a millisecond to tens), and
		// any extra work in the process, the flood's refusals included,
		// shows in it. The refusals were checked; the ratio is reported.
		t.Logf("host overloaded (load average %.1f on %d CPUs): the p99 ratio %.2f is reported, not asserted",
			load, runtime.NumCPU(), ratio)
		return
	}
	t.Fatalf("the quiet tenant's p99 under a flood was %.2f times its p99 alone in each of %d attempts, want at most 2",
		ratio, fairAttempts)
}

// overloaded reports the one-minute load average when it is above twice
// the CPUs (Linux; elsewhere never overloaded).
func overloaded() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, false
	}
	load, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, false
	}
	return load, load > 2*float64(runtime.NumCPU())
}

// floodCounts are the flooder's answers by kind.
type floodCounts struct{ OK, Limited, Other int64 }

// flooder drives the flooding process: "on" and "off" on its stdin start
// and stop the flood, "count" makes it print (and reset) its counts.
type flooder struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

// Environment of the flooding process (this test binary again).
const (
	envFloodURL    = "MCPD_TEST_FLOOD_URL"
	envFloodToken  = "MCPD_TEST_FLOOD_TOKEN"
	envFloodServer = "MCPD_TEST_FLOOD_SERVER"
)

func startFlooder(t *testing.T, c *fairClient, server uuid.UUID) *flooder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFlooderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envFloodURL+"="+c.base, envFloodToken+"="+c.token, envFloodServer+"="+server.String())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Wait()
		cancel()
	})
	f := &flooder{in: in, out: bufio.NewScanner(out)}
	f.command(t, "ready")
	return f
}

// command sends cmd and waits for the process to answer it.
func (f *flooder) command(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := fmt.Fprintln(f.in, cmd); err != nil {
		t.Fatalf("flooder %s: %v", cmd, err)
	}
	for f.out.Scan() {
		if line := f.out.Text(); strings.HasPrefix(line, "flooder: ") {
			return strings.TrimPrefix(line, "flooder: ")
		}
	}
	t.Fatalf("flooder %s: no answer: %v", cmd, f.out.Err())
	return ""
}

func (f *flooder) set(t *testing.T, on bool) {
	t.Helper()
	if on {
		f.command(t, "on")
	} else {
		f.command(t, "off")
	}
}

func (f *flooder) counts(t *testing.T) floodCounts {
	t.Helper()
	var c floodCounts
	if err := json.Unmarshal([]byte(f.command(t, "count")), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFlooderProcess is the flooding process of
// TestTenantFloodDoesNotHurtAnother; it does nothing in a normal run.
func TestFlooderProcess(t *testing.T) {
	base := os.Getenv(envFloodURL)
	if base == "" {
		t.Skip("the flooding process of TestTenantFloodDoesNotHurtAnother")
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &fairClient{http: &http.Client{Transport: tr, Timeout: 5 * time.Second}, base: base, token: os.Getenv(envFloodToken)}
	server := os.Getenv(envFloodServer)
	var (
		counts floodCounts
		mu     sync.Mutex
		stop   context.CancelFunc
		wg     sync.WaitGroup
	)
	// flood sends floodRate heartbeats per second from 16 workers until
	// ctx ends.
	flood := func(ctx context.Context) {
		const workers = 16
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				for i := 0; ; i++ {
					at := start.Add(time.Duration(i*workers+w) * time.Second / floodRate)
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Until(at)):
					}
					code, _, err := c.post(ctx, "/v1/mcp/servers/heartbeat", map[string]string{"server_id": server})
					if err != nil && ctx.Err() != nil {
						return
					}
					mu.Lock()
					switch code {
					case http.StatusOK:
						counts.OK++
					case http.StatusTooManyRequests:
						counts.Limited++
					default:
						counts.Other++
					}
					mu.Unlock()
				}
			}()
		}
	}
	halt := func() {
		if stop != nil {
			stop()
			wg.Wait()
			stop = nil
		}
	}
	defer halt()
	deadline := time.AfterFunc(2*time.Minute, func() { os.Exit(1) }) // never outlive the test
	defer deadline.Stop()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "on":
			halt()
			ctx, cancel := context.WithCancel(context.Background())
			stop = cancel
			flood(ctx)
		case "off":
			halt()
		case "count":
			mu.Lock()
			b, _ := json.Marshal(counts)
			counts = floodCounts{}
			mu.Unlock()
			fmt.Println("flooder: " + string(b))
			continue
		}
		fmt.Println("flooder: " + in.Text())
	}
}
