package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// TestMain stops the shared PostgreSQL cluster of the tests that use one,
// and checks for goroutines left behind (pgtest.Run does both).
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// Bounds of every wait on the daemon: short steps, a hard cap.
const (
	pollCap = 10 * time.Second
)

func devConfig() config.Config {
	cfg := config.Default()
	cfg.Dev = true
	cfg.Listen = "127.0.0.1:0"
	return cfg
}

// start runs a daemon for cfg and stops it at the end of the test.
func start(t *testing.T, cfg config.Config, opts daemon.Options) *daemon.Daemon {
	t.Helper()
	d, err := daemon.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return d
}

var tokenRE = regexp.MustCompile(`export MCPCTL_TOKEN=(\S+)`)
var secretRE = regexp.MustCompile(`secret file\s+(\S+)`)

func TestDevLifecycleWithFakeClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	var stdout, logs testlog.Buffer
	cfg := devConfig()
	// The clock jumps whole intervals at once below, which the blind-window
	// rule would rightly take for a registry that could not see; that rule
	// is tested on its own.
	cfg.BlindAfter = -1
	d := start(t, cfg, daemon.Options{Clock: clock, Stdout: &stdout, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	banner := stdout.String()
	m := tokenRE.FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no token in the banner:\n%s", banner)
	}
	base := "http://" + d.Addr()
	if !strings.Contains(banner, base) || !strings.Contains(banner, "mcpctl") || !strings.Contains(banner, "curl") {
		t.Fatalf("banner lacks the URL or the lines to try:\n%s", banner)
	}
	secretFile := secretRE.FindStringSubmatch(banner)[1]
	if fi, err := os.Stat(secretFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file %s: %v %v", secretFile, fi, err)
	}
	// The secret file works for issuing tokens, as mcpctl token issue does.
	secret, err := auth.ReadSecretFile(secretFile)
	if err != nil {
		t.Fatal(err)
	}

	c := client.New(base, m[1])
	defer c.CloseIdleConnections()
	ctx := context.Background()
	if err := c.Healthz(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Readyz(ctx); err != nil {
		t.Fatal(err)
	}
	srv, created, err := c.Register(ctx, api.RegisterRequest{ModuleName: "calendar", Version: "1.3.2",
		SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "search"}}}, "")
	if err != nil || !created {
		t.Fatalf("register: %v", err)
	}
	if srv.HeartbeatIntervalSecs != 10 {
		t.Fatalf("heartbeat_interval_seconds %v", srv.HeartbeatIntervalSecs)
	}

	// The monitor's ticker exists once the first sweep is done; the held
	// heartbeats' flush ticker beside it.
	if err := clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal(err)
	}
	status := func() registry.Status {
		s, err := c.Server(ctx, srv.ServerID)
		if err != nil {
			t.Fatal(err)
		}
		return s.Status
	}
	// 2I, plus the grace the sweep allows for heartbeats held for their
	// flush window (three windows of 500ms).
	grace := lifecycle.SweepGrace(cfg.EffectiveHeartbeatFlushInterval())
	clock.Advance(20*time.Second + grace)
	testwait.Eventually(t, "degraded after 2I", func() bool { return status() == registry.StatusDegraded })
	clock.Advance(10 * time.Second)
	testwait.Eventually(t, "unhealthy after 3I", func() bool { return status() == registry.StatusUnhealthy })
	skills, err := c.Skills(ctx, srv.ServerID)
	if err != nil || skills[0].Available {
		t.Fatalf("skills while unhealthy: %+v %v", skills, err)
	}
	if hb, err := c.Heartbeat(ctx, srv.ServerID); err != nil || hb.Status != registry.StatusHealthy {
		t.Fatalf("heartbeat: %+v %v", hb, err)
	}

	// A token from the printed secret file is as good as the banner's.
	other, err := auth.Issue(secret, srv.TenantID, "t", "mcp:read", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c2 := client.New(base, other)
	defer c2.CloseIdleConnections()
	if _, err := c2.Server(ctx, srv.ServerID); err != nil {
		t.Fatalf("token from the secret file: %v", err)
	}

	metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{`mcpd_servers{status="healthy"} 1`, `mcpd_transitions_total{from="degraded",to="unhealthy"} 1`,
		`mcpd_sweep_duration_seconds_count`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}

	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := os.Stat(secretFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dev secret file left behind: %v", err)
	}
	if err := c.Healthz(ctx); err == nil {
		t.Fatal("still serving after Stop")
	}
	if !strings.Contains(logs.String(), `"msg":"mcpd listening"`) || !strings.Contains(logs.String(), `"msg":"mcpd stopped"`) {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

func TestSystemdNotify(t *testing.T) {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := dir + "/notify"
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	env := map[string]string{"NOTIFY_SOCKET": sock, "WATCHDOG_USEC": "100000", "WATCHDOG_PID": strconv.Itoa(os.Getpid())}
	d := start(t, devConfig(), daemon.Options{Getenv: func(k string) string { return env[k] }})

	read := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = conn.SetReadDeadline(time.Now().Add(pollCap))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("read notify socket: %v", err)
		}
		return string(buf[:n])
	}
	if got := read(); !strings.HasPrefix(got, "READY=1\n") || !strings.Contains(got, d.Addr()) {
		t.Fatalf("first datagram %q, want READY=1", got)
	}
	if got := read(); got != "WATCHDOG=1" {
		t.Fatalf("second datagram %q, want WATCHDOG=1", got)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for {
		got := read()
		if got == "STOPPING=1" {
			break
		}
		if got != "WATCHDOG=1" {
			t.Fatalf("datagram %q, want STOPPING=1", got)
		}
	}
}

func TestNoWatchdogForAnotherPID(t *testing.T) {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := dir + "/notify"
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	env := map[string]string{"NOTIFY_SOCKET": sock, "WATCHDOG_USEC": "20000", "WATCHDOG_PID": "1"}
	d := start(t, devConfig(), daemon.Options{Getenv: func(k string) string { return env[k] }})
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	buf := make([]byte, 4096)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := conn.Read(buf)
		if err != nil {
			break
		}
		got = append(got, strings.SplitN(string(buf[:n]), "\n", 2)[0])
	}
	if strings.Join(got, " ") != "READY=1 STOPPING=1" {
		t.Fatalf("datagrams %q, want READY=1 then STOPPING=1 and no watchdog", got)
	}
}

// TestDatabaseDown: a database that does not answer is no reason not to
// start; the API answers 503 with Retry-After and /readyz 503.
func TestDatabaseDown(t *testing.T) {
	secret := writeFile(t, "jwt.secret", strings.Repeat("x", 32)+"\n")
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DatabaseURL = "postgres://mcpd@127.0.0.1:1/mcpd?connect_timeout=1&sslmode=disable"
	cfg.AuthJWTSecretFile = secret
	cfg.RequestTimeout = 2 * time.Second
	d := start(t, cfg, daemon.Options{})
	base := "http://" + d.Addr()

	tok, err := auth.Issue([]byte(strings.Repeat("x", 32)), uuid.New(), "t", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(base, tok)
	defer c.CloseIdleConnections()
	ctx := context.Background()
	if err := c.Healthz(ctx); err != nil {
		t.Fatalf("healthz: %v", err)
	}
	var p *api.Problem
	if err := c.Readyz(ctx); !errors.As(err, &p) || p.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz: %v", err)
	}
	_, _, err = c.Register(ctx, api.RegisterRequest{ModuleName: "calendar", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, "")
	if !errors.As(err, &p) || p.Status != http.StatusServiceUnavailable || (p.RetryAfter < time.Second || p.RetryAfter > 3*time.Second) {
		t.Fatalf("register with the database down: %#v", err)
	}
	if _, err := c.Servers(ctx, client.ListServersParams{}); !errors.As(err, &p) || p.Status != http.StatusServiceUnavailable {
		t.Fatalf("list with the database down: %v", err)
	}
}

func TestNewRefusesInvalidConfig(t *testing.T) {
	cfg := devConfig()
	cfg.HeartbeatInterval = 0
	if _, err := daemon.New(cfg, daemon.Options{}); err == nil {
		t.Fatal("New accepted a zero heartbeat interval")
	}
}

func TestRunStopsOnContext(t *testing.T) {
	d, err := daemon.New(devConfig(), daemon.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	testwait.Eventually(t, "listening", func() bool { return d.Addr() != "" })
	if got := httpGet(t, "http://"+d.Addr()+"/healthz"); !strings.Contains(got, "ok") {
		t.Fatalf("healthz %q", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(pollCap):
		t.Fatal("Run did not return after cancel")
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return b.String()
}

// The daemon's monitor sweeps through the store's guarded sweep: after a
// gap longer than blind-after (the registry could not see), a silent server
// is not moved, and the blind window is counted. Were the guard bypassed,
// the server would turn unhealthy at once.
func TestDaemonSweepIsGuarded(t *testing.T) {
	clock := clockwork.NewFakeClock()
	var stdout testlog.Buffer
	cfg := devConfig() // blind-after: its default, two periods or one interval
	d := start(t, cfg, daemon.Options{Clock: clock, Stdout: &stdout})
	c := client.New("http://"+d.Addr(), tokenRE.FindStringSubmatch(stdout.String())[1])
	defer c.CloseIdleConnections()
	ctx := context.Background()
	srv, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "calendar", Version: "1.3.2",
		SupportedProtocols: []string{"2025-06-18"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	// Both tickers of the fake clock wait, the monitor's and the held
	// heartbeats' flush: with one, the jump could come before the
	// monitor's ticker exists, and no sweep would ever see it.
	wctx, cancel := context.WithTimeout(ctx, pollCap)
	defer cancel()
	if err := clock.BlockUntilContext(wctx, 2); err != nil {
		t.Fatalf("the monitor's and the flush's tickers: %v", err)
	}
	clock.Advance(10 * cfg.HeartbeatInterval) // one jump: a blind registry
	testwait.Eventually(t, "the blind window counted", func() bool {
		return strings.Contains(httpGet(t, "http://"+d.Addr()+"/metrics"), "mcpd_blind_windows_total 1")
	})
	if s, err := c.Server(ctx, srv.ServerID); err != nil || s.Status != registry.StatusHealthy {
		t.Fatalf("after a blind gap: %+v, %v; want still healthy", s.Status, err)
	}
}
