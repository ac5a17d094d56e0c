package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/backoff"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/mcpinspect"
	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

var testTools = []mcptest.Tool{
	{Name: "create-event", Description: "Create an event"},
	{Name: "list-events", Description: "List the events of a day"},
	{Name: "share"},
}

func skillNames(sk []registry.Skill) []string {
	var names []string
	for _, s := range sk {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// allSkills checks whether every skill is available (or unavailable for the
// cascade's reason).
func allSkills(sk []registry.Skill, available bool) bool {
	for _, s := range sk {
		if s.Available != available {
			return false
		}
		if !available && (s.UnavailableReason == nil || *s.UnavailableReason != registry.ReasonServerUnhealthy) {
			return false
		}
	}
	return len(sk) > 0
}

// controls are the knobs of a test server, over HTTP or stdio alike.
type controls struct {
	target   mcpinspect.Target
	setPing  func(mcptest.PingMode)
	setTools func(...mcptest.Tool)
	protocol string
}

func httpServer(t *testing.T, cfg mcptest.Config) controls {
	srv := mcptest.NewServer(cfg)
	return controls{mcpinspect.Target{URL: mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{})}, srv.SetPing, srv.SetTools, "2025-11-25"}
}

func stdioServer(t *testing.T, cfg mcptest.Config) (controls, *mcptest.Stdio) {
	st := mcptest.NewStdio(t, cfg)
	return controls{mcpinspect.Target{Command: st.Command},
		func(m mcptest.PingMode) { st.SetPing(t, m) },
		func(tools ...mcptest.Tool) { st.SetTools(t, tools...) }, "2026-07-28"}, st
}

// TestAgentLifecycle runs the whole story over both transports: registered
// from what the server says, kept healthy, unhealthy while probes fail or
// hang (skills unavailable), healthy again, skills following the tool list,
// deregistered at the end.
func TestAgentLifecycle(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			reg := setupRegistry(t)
			cfg := mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: testTools}
			var c controls
			if transport == "http" {
				c = httpServer(t, cfg)
			} else {
				c, _ = stdioServer(t, cfg)
			}
			ag := start(t, fastOptions(reg, "calendar", c.target))

			srv := reg.waitStatus(t, "calendar", registry.StatusHealthy, 5*time.Second)
			if srv.Version != "1.4.0" || srv.SupportedProtocols[0] != c.protocol || srv.HeartbeatIntervalSecs != testInterval.Seconds() {
				t.Fatalf("registered %+v", srv)
			}
			if !strings.Contains(string(srv.CapabilityAdvertisement), `"tools":{"listChanged":true}`) {
				t.Fatalf("capabilities %s", srv.CapabilityAdvertisement)
			}
			// Over HTTP the URL it probes is the server's remote; over stdio none.
			wantRemotes := []registry.Remote{}
			if transport == "http" {
				wantRemotes = []registry.Remote{{Type: registry.RemoteStreamableHTTP, URL: c.target.URL}}
			}
			if !slices.Equal(srv.Remotes, wantRemotes) {
				t.Fatalf("remotes %+v, want %+v", srv.Remotes, wantRemotes)
			}
			sk := reg.skills(t, srv.ServerID)
			if got := skillNames(sk); !slices.Equal(got, []string{"create-event", "list-events", "share"}) || !allSkills(sk, true) {
				t.Fatalf("skills %+v", sk)
			}

			// Kept healthy: heartbeats flow (one per interval exactly:
			// TestAgentHeartbeatsOncePerInterval, on a fake clock).
			before := reg.heartbeats.Load()
			testwait.Eventually(t, "three more heartbeats", func() bool { return reg.heartbeats.Load()-before >= 3 })
			if s, _ := reg.server(t, "calendar"); s.Status != registry.StatusHealthy {
				t.Fatalf("status %s while the server answers", s.Status)
			}

			for _, mode := range []mcptest.PingMode{mcptest.PingFail, mcptest.PingHang} {
				c.setPing(mode)
				reg.waitStatus(t, "calendar", registry.StatusUnhealthy, 5*time.Second)
				testwait.Until(t, "skills unavailable", 2*time.Second, func() bool { return allSkills(reg.skills(t, srv.ServerID), false) })
				c.setPing(mcptest.PingOK)
				back := reg.waitStatus(t, "calendar", registry.StatusHealthy, 5*time.Second)
				if back.ServerID != srv.ServerID {
					t.Fatalf("recovered as %s, want the same server %s", back.ServerID, srv.ServerID)
				}
				if !allSkills(reg.skills(t, srv.ServerID), true) {
					t.Fatalf("skills after recovery from %s: %+v", mode, reg.skills(t, srv.ServerID))
				}
			}

			// The tool list changes: the skills follow.
			c.setTools(mcptest.Tool{Name: "share", Description: "Share a calendar"}, mcptest.Tool{Name: "find-slot"})
			testwait.Until(t, "skills updated", 5*time.Second, func() bool {
				return slices.Equal(skillNames(reg.skills(t, srv.ServerID)), []string{"find-slot", "share"})
			})
			for _, s := range reg.skills(t, srv.ServerID) {
				if s.Name == "share" && s.Description != "Share a calendar" {
					t.Fatalf("description of share %q", s.Description)
				}
			}

			if err := ag.stop(t); err != nil {
				t.Fatalf("Run returned %v after cancel, want nil", err)
			}
			if s, _ := reg.server(t, "calendar"); s.Status != registry.StatusDeregistered || s.DeregisteredAt == nil {
				t.Fatalf("after stop: %+v", s)
			}
			logs := ag.logs.String()
			for _, want := range []string{"registered", "liveness probe failed: no heartbeat", "the MCP server answers again", "tool list changed", "deregistered"} {
				if !strings.Contains(logs, want) {
					t.Errorf("the log lacks %q", want)
				}
			}
		})
	}
}

func TestAgentRestartsStdioServer(t *testing.T) {
	t.Parallel()
	reg := setupRegistry(t)
	c, st := stdioServer(t, mcptest.Config{Name: "files", Version: "1.0.0", Tools: testTools})
	ag := start(t, fastOptions(reg, "files", c.target))
	srv := reg.waitStatus(t, "files", registry.StatusHealthy, 5*time.Second)

	// An upgrade: the next start is another version with another tool.
	st.Update(t, func(cfg *mcptest.Config) {
		cfg.Version = "1.1.0"
		cfg.Tools = append(slices.Clone(testTools), mcptest.Tool{Name: "archive"})
	})
	first := st.PID()
	st.Kill(t)
	testwait.Until(t, "a restart", 5*time.Second, func() bool { return st.Starts() >= 2 && st.PID() != first })
	testwait.Until(t, "the new version registered", 5*time.Second, func() bool {
		s, _ := reg.server(t, "files")
		return s.Version == "1.1.0" && s.Status == registry.StatusHealthy
	})
	if s, _ := reg.server(t, "files"); s.ServerID != srv.ServerID {
		t.Fatalf("re-registered as %s, want the same server %s", s.ServerID, srv.ServerID)
	}
	if got := skillNames(reg.skills(t, srv.ServerID)); !slices.Contains(got, "archive") {
		t.Fatalf("skills %v after the upgrade", got)
	}
	if !strings.Contains(ag.logs.String(), "the MCP server exited") {
		t.Fatalf("the log does not say the server exited:\n%s", ag.logs)
	}

	// A server that dies at once, again and again: the registry sees it
	// unhealthy; when it starts again, it recovers. (The restarts' backoff:
	// TestAgentRestartBackoff, on a fake clock.)
	st.Update(t, func(cfg *mcptest.Config) { cfg.ExitAtStart = 3 })
	starts := st.Starts()
	st.Kill(t)
	reg.waitStatus(t, "files", registry.StatusUnhealthy, 5*time.Second)
	testwait.Until(t, "more restarts", 3*time.Second, func() bool { return st.Starts() >= starts+3 })
	st.Update(t, func(cfg *mcptest.Config) { cfg.ExitAtStart = 0 })
	reg.waitStatus(t, "files", registry.StatusHealthy, 5*time.Second)
}

func TestAgentRegistryDownThenUp(t *testing.T) {
	t.Parallel()
	reg := setupRegistry(t)
	c := httpServer(t, mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: testTools})
	ag := start(t, fastOptions(reg, "calendar", c.target))
	srv := reg.waitStatus(t, "calendar", registry.StatusHealthy, 5*time.Second)

	for _, mode := range []registryMode{registry503, registryReset} {
		failed := strings.Count(ag.logs.String(), "heartbeat failed")
		reg.mode.Store(mode)
		reg.waitStatus(t, "calendar", registry.StatusUnhealthy, 3*time.Second)
		testwait.Until(t, "the backoff at its cap", 3*time.Second, func() bool {
			return strings.Count(ag.logs.String(), "heartbeat failed") >= failed+4 // 20, 40, 80, 150 ms
		})
		reg.mode.Store(registryUp)
		back := reg.waitStatus(t, "calendar", registry.StatusHealthy, 3*time.Second)
		if back.ServerID != srv.ServerID {
			t.Fatalf("after %s: server %s, want %s", mode, back.ServerID, srv.ServerID)
		}
	}
	if !strings.Contains(ag.logs.String(), "heartbeat failed") || !strings.Contains(ag.logs.String(), "mcpd answers again") {
		t.Fatalf("the log does not tell the outage:\n%s", ag.logs)
	}
}

func TestAgentRegistersAgainOn404And409(t *testing.T) {
	t.Parallel()
	reg := setupRegistry(t)
	c := httpServer(t, mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: testTools})
	ag := start(t, fastOptions(reg, "calendar", c.target))
	srv := reg.waitStatus(t, "calendar", registry.StatusHealthy, 5*time.Second)

	// Someone deregisters it: the next heartbeat gets 409, the agent
	// registers the same server again.
	if _, err := reg.client.Deregister(context.Background(), srv.ServerID); err != nil {
		t.Fatal(err)
	}
	back := reg.waitStatus(t, "calendar", registry.StatusHealthy, 3*time.Second)
	if back.ServerID != srv.ServerID || back.DeregisteredAt != nil {
		t.Fatalf("after 409: %+v", back)
	}

	// mcpd forgot everything (an in-memory mcpd restarted): 404, and the
	// agent registers it anew, skills and all.
	reg.restartEmpty(t)
	fresh := reg.waitStatus(t, "calendar", registry.StatusHealthy, 3*time.Second)
	if fresh.ServerID == srv.ServerID || len(reg.skills(t, fresh.ServerID)) != len(testTools) {
		t.Fatalf("after 404: %+v", fresh)
	}
	logs := ag.logs.String()
	if !strings.Contains(logs, "the server was deregistered: registering again") || !strings.Contains(logs, "mcpd does not know the server: registering again") {
		t.Fatalf("log:\n%s", logs)
	}
}

func TestAgentPermanentErrors(t *testing.T) {
	t.Parallel()
	reg := setupRegistry(t)
	c := httpServer(t, mcptest.Config{Name: "odd", Version: "2.0", Tools: testTools})

	run := func(opts Options) error {
		t.Helper()
		a, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return a.Run(ctx)
	}
	err := run(fastOptions(reg, "odd", c.target))
	var pe *PermanentError
	var ve *mcpinspect.VersionError
	if !errors.As(err, &pe) || !errors.As(err, &ve) || ve.Version != "2.0" {
		t.Fatalf("Run with version 2.0 = %v, want a permanent version error", err)
	}
	if _, ok := reg.server(t, "odd"); ok {
		t.Fatal("registered despite the bad version")
	}

	// A token that may only read: 403 at the first registration.
	token, err := auth.Issue(reg.secret, reg.tenant, "agent-test", auth.ScopeRead, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	readOnly := client.New(reg.url, token)
	t.Cleanup(readOnly.CloseIdleConnections)
	opts := fastOptions(reg, "odd", c.target)
	opts.Version = "2.0.0"
	opts.Registry = readOnly
	logs := &testlog.Buffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	err = run(opts)
	var p *api.Problem
	if !errors.As(err, &pe) || !errors.As(err, &p) || p.Status != 403 {
		t.Fatalf("Run with a read-only token = %v, want a permanent 403", err)
	}
	// It says it gives up, and promises no retry.
	if l := logs.String(); !strings.Contains(l, "register refused") || strings.Contains(l, "retry_in") {
		t.Fatalf("log of a refused first registration:\n%s", l)
	}

	// The version given overrides the server's.
	opts.Registry = reg.client
	ag := start(t, opts)
	if s := reg.waitStatus(t, "odd", registry.StatusHealthy, 5*time.Second); s.Version != "2.0.0" {
		t.Fatalf("version %s", s.Version)
	}
	_ = ag
}

func TestNewChecksOptions(t *testing.T) {
	t.Parallel()
	c := client.New("http://127.0.0.1:1", "")
	target := mcpinspect.Target{URL: "http://127.0.0.1:1/mcp"}
	for _, o := range []Options{
		{Module: "Bad_Name", Target: target, Registry: c},
		{Module: "ok", Target: mcpinspect.Target{}, Registry: c},
		{Module: "ok", Target: target},
		{Module: "ok", Target: target, Registry: c, Version: "v1"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func TestBackoffAndJitter(t *testing.T) {
	t.Parallel()
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := backoff.Exponential(time.Second, 30*time.Second, i+1); got != w {
			t.Errorf("backoff attempt %d = %s, want %s", i+1, got, w)
		}
	}
	a := &Agent{opts: Options{Jitter: 0.1, Rand: rand.New(rand.NewPCG(1, 2))}}
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := a.jitter(10 * time.Second)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 9*time.Second || hi > 11*time.Second || hi-lo < 1500*time.Millisecond {
		t.Fatalf("jitter of 10s spans %s..%s, want within 9s..11s and spread", lo, hi)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want outcome
	}{
		{nil, outcomeOK},
		{errors.New("dial tcp: connection refused"), outcomeTransient},
		{&api.Problem{Status: 404}, outcomeNotFound},
		{&api.Problem{Status: 409}, outcomeDeregistered},
		{&api.Problem{Status: 503}, outcomeTransient},
		{&api.Problem{Status: 429}, outcomeTransient},
		{&api.Problem{Status: 401}, outcomeRejected},
		{&api.Problem{Status: 400}, outcomeRejected},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestAnswered(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("ping: %w", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "sick"}), true},
		{fmt.Errorf("ping: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("ping: sending: %w: dial tcp: connection refused", &jsonrpc.Error{Code: codeRejectedByTransport, Message: "rejected by transport"}), false},
		{errors.New("connection closed"), false},
	} {
		if got := answered(c.err); got != c.want {
			t.Errorf("answered(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestAgentReconnectsToRestartedHTTPServer: the HTTP server goes away and
// comes back (a new process on the same address, which knows no session):
// the agent connects again and the server recovers.
func TestAgentReconnectsToRestartedHTTPServer(t *testing.T) {
	t.Parallel()
	reg := setupRegistry(t)
	cfg := mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: testTools}
	var (
		mu  sync.Mutex
		cur = mcptest.NewServer(cfg)
		up  = true
	)
	url := mcptest.ServeHTTP(t, cur, mcptest.HTTPOptions{Wrap: func(next http.Handler) http.Handler {
		// One address, served by whichever server is current; down: 503.
		handlers := map[*mcptest.Server]http.Handler{}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			s, ok := cur, up
			h := handlers[s]
			if h == nil {
				h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP }, nil)
				handlers[s] = h
			}
			mu.Unlock()
			if !ok {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}})
	ag := start(t, fastOptions(reg, "calendar", mcpinspect.Target{URL: url}))
	srv := reg.waitStatus(t, "calendar", registry.StatusHealthy, 5*time.Second)
	mu.Lock()
	up = false
	old := cur
	mu.Unlock()
	reg.waitStatus(t, "calendar", registry.StatusUnhealthy, 5*time.Second)
	mu.Lock()
	cur, up = mcptest.NewServer(cfg), true
	mu.Unlock()
	old.Close()
	t.Cleanup(func() { mu.Lock(); defer mu.Unlock(); cur.Close() })
	back := reg.waitStatus(t, "calendar", registry.StatusHealthy, 5*time.Second)
	if back.ServerID != srv.ServerID {
		t.Fatalf("recovered as %s, want %s", back.ServerID, srv.ServerID)
	}
	if n := strings.Count(ag.logs.String(), "connected to the MCP server"); n < 2 {
		t.Fatalf("connected %d times, want a reconnection:\n%s", n, ag.logs)
	}
}

func TestAgentServerEverything(t *testing.T) {
	t.Parallel()
	cmd := mcptest.ServerEverything(t)
	reg := setupRegistry(t)
	opts := fastOptions(reg, "everything", mcpinspect.Target{Command: cmd})
	opts.ConnectTimeout, opts.ProbeTimeout, opts.ProbeRevisions = 20*time.Second, time.Second, true
	ag := start(t, opts)
	srv := reg.waitStatus(t, "everything", registry.StatusHealthy, 30*time.Second)
	if !registry.ValidVersion(srv.Version) || !slices.Equal(srv.SupportedProtocols, []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
		t.Fatalf("registered %+v", srv)
	}
	if got := skillNames(reg.skills(t, srv.ServerID)); !slices.Contains(got, "echo") {
		t.Fatalf("skills %v", got)
	}
	// Kept healthy for a few intervals by pings to node.
	before := reg.heartbeats.Load()
	testwait.Eventually(t, "three more heartbeats", func() bool { return reg.heartbeats.Load()-before >= 3 })
	if s, _ := reg.server(t, "everything"); s.Status != registry.StatusHealthy {
		t.Fatalf("status %s", s.Status)
	}
	if err := ag.stop(t); err != nil {
		t.Fatal(err)
	}
	if s, _ := reg.server(t, "everything"); s.Status != registry.StatusDeregistered {
		t.Fatalf("after stop: %s", s.Status)
	}
}
