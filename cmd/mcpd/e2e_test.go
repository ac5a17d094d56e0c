package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// binPath is the mcpd binary that TestMain builds once.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "mcpd")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build mcpd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// Bounds of every wait: short steps, a hard cap.
const (
	pollStep = 20 * time.Millisecond
	pollCap  = 10 * time.Second
)

// proc is a running mcpd binary.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	secret []byte
	stderr *testlog.Buffer
	done   chan struct{} // closed when the process has exited
	err    error         // of Wait, once done
}

// e2eRequestTimeout is startMcpd's --request-timeout: 2 s, and 5 s when the
// test databases are on Citus (MCPD_TEST_ENGINE=citus). There, on a loaded
// 2-core machine, a tenant's burst of recoveries beside a sweep ran past
// 2 s (TestReplicaKilledMidSweep in a make citus-e2e run, 2026-12-05:
// eight heartbeats and the sweep answered "context deadline exceeded"
// together). What the tests check is what a call answers, not how fast.
var e2eRequestTimeout = onEngine(2*time.Second, 5*time.Second)

// onEngine is plain, or citus when the test databases are on Citus
// (MCPD_TEST_ENGINE=citus): a bound that a loaded 2-core machine running
// three nodes needs wider.
func onEngine[T any](plain, citus T) T {
	if pgtest.OnCitus() {
		return citus
	}
	return plain
}

// startMcpd runs the binary against databaseURL on a free loopback port,
// with a 200ms heartbeat interval, and waits until it listens.
func startMcpd(t *testing.T, databaseURL string, extra ...string) *proc {
	t.Helper()
	secret := []byte(strings.Repeat("e2e-secret-", 4))
	secretFile := filepath.Join(t.TempDir(), "jwt.secret")
	if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--database-url", databaseURL,
		"--auth-jwt-secret-file", secretFile,
		"--listen", "127.0.0.1:0",
		"--heartbeat-interval", "200ms",
		"--monitor-period", "100ms",
		"--request-timeout", e2eRequestTimeout.String(),
		"--log-format", "json",
	}, extra...)
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=") // never talk to a real systemd
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, secret: secret, stderr: &testlog.Buffer{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderrPipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.stderr, line)
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "mcpd listening" {
				listening <- rec.Addr
			}
		}
		_, _ = io.Copy(p.stderr, stderrPipe)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("mcpd stderr:\n%s", p.stderr.String())
		}
	})
	select {
	case p.addr = <-listening:
	case <-p.done:
		t.Fatalf("mcpd exited before listening: %v\n%s", p.err, p.stderr.String())
	case <-time.After(pollCap):
		t.Fatalf("mcpd not listening within %s:\n%s", pollCap, p.stderr.String())
	}
	return p
}

// client returns a client of p with a read-write token of tenant.
func (p *proc) client(t *testing.T, tenant uuid.UUID) *client.Client {
	t.Helper()
	tok, err := auth.Issue(p.secret, tenant, "e2e", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := client.New("http://"+p.addr, tok)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// running reports whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func TestLifecycleOverHTTP(t *testing.T) {
	t.Parallel()
	lifecycleOverHTTP(t, pgtest.NewDB(t))
}

func lifecycleOverHTTP(t *testing.T, db *pgtest.DB) {
	p := startMcpd(t, db.AppURL)
	c := p.client(t, uuid.New())
	ctx := context.Background()

	testwait.Eventually(t, "ready", func() bool { return c.Readyz(ctx) == nil })
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	srv, created, err := c.Register(ctx, api.RegisterRequest{
		ModuleName: "calendar", Version: "1.3.2", SupportedProtocols: []string{"2025-06-18"},
		CapabilityAdvertisement: json.RawMessage(`{"tools":{"listChanged":true}}`),
		Skills:                  []registry.SkillInfo{{Name: "search", Description: "find events"}, {Name: "book"}},
	}, tp)
	if err != nil || !created {
		t.Fatalf("register: created %v err %v", created, err)
	}
	if srv.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || srv.HeartbeatIntervalSecs != 0.2 || srv.Status != registry.StatusHealthy {
		t.Fatalf("registered %+v", srv)
	}
	again, created, err := c.Register(ctx, api.RegisterRequest{ModuleName: "calendar", Version: "1.3.3",
		SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "search"}, {Name: "book"}}}, tp)
	if err != nil || created || again.ServerID != srv.ServerID || again.Version != "1.3.3" {
		t.Fatalf("re-register: %+v created %v err %v", again, created, err)
	}
	if hb, err := c.Heartbeat(ctx, srv.ServerID); err != nil || hb.Status != registry.StatusHealthy {
		t.Fatalf("heartbeat: %+v %v", hb, err)
	}

	status := func() registry.Status {
		s, err := c.Server(ctx, srv.ServerID)
		if err != nil {
			t.Fatal(err)
		}
		return s.Status
	}
	// Silence: degraded at 2I, unhealthy at 3I.
	testwait.Eventually(t, "away from healthy", func() bool { return status() != registry.StatusHealthy })
	testwait.Eventually(t, "unhealthy", func() bool { return status() == registry.StatusUnhealthy })
	skills, err := c.Skills(ctx, srv.ServerID)
	if err != nil || len(skills) != 2 {
		t.Fatalf("skills: %+v %v", skills, err)
	}
	for _, s := range skills {
		if s.Available || s.UnavailableReason == nil || *s.UnavailableReason != registry.ReasonServerUnhealthy {
			t.Fatalf("skill %s while unhealthy: %+v", s.Name, s)
		}
	}

	// A heartbeat brings it back, skills too. On a loaded machine the
	// read of the skills may come 3I after the heartbeat, when the server
	// is unhealthy again: each try heartbeats first.
	if hb, err := c.Heartbeat(ctx, srv.ServerID); err != nil || hb.Status != registry.StatusHealthy {
		t.Fatalf("heartbeat from unhealthy: %+v %v", hb, err)
	}
	for try := 0; ; try++ {
		skills, err = c.Skills(ctx, srv.ServerID)
		if err != nil {
			t.Fatal(err)
		}
		back := true
		for _, s := range skills {
			back = back && s.Available
		}
		if back {
			break
		}
		if try == 20 {
			t.Fatalf("skills not back after recovery, %d heartbeats: %+v", try+1, skills)
		}
		if hb, err := c.Heartbeat(ctx, srv.ServerID); err != nil || hb.Status != registry.StatusHealthy {
			t.Fatalf("heartbeat: %+v %v", hb, err)
		}
	}

	dereg, err := c.Deregister(ctx, srv.ServerID)
	if err != nil || dereg.Status != registry.StatusDeregistered || dereg.DeregisteredAt == nil {
		t.Fatalf("deregister: %+v %v", dereg, err)
	}
	var prob *api.Problem
	if _, err := c.Heartbeat(ctx, srv.ServerID); !errors.As(err, &prob) || prob.Status != http.StatusConflict {
		t.Fatalf("heartbeat after deregister: %v", err)
	}

	events, err := c.Events(ctx, client.ListEventsParams{ServerID: srv.ServerID.String(), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var unhealthyFrom registry.Status
	for i, e := range events.Events {
		kinds = append(kinds, strings.TrimPrefix(string(e.Kind), "mcp.server."))
		if e.TraceID != srv.TraceID {
			t.Fatalf("event %s trace_id %q", e.Kind, e.TraceID)
		}
		// Each event a transition of the contract from where the one
		// before ended: a duplicate or a step out of order shows here.
		var from registry.Status
		if e.FromStatus != nil {
			from = *e.FromStatus
		}
		if !e.Kind.Spec().Allows(from, e.ToStatus) || i > 0 && from != events.Events[i-1].ToStatus {
			t.Fatalf("event %d %s from %q to %s: %s", i, e.Kind, from, e.ToStatus, strings.Join(kinds, " "))
		}
		if e.Kind == registry.KindUnhealthy {
			unhealthyFrom = from
		}
	}
	// The silence goes to unhealthy, through degraded unless the sweep
	// came an interval late (API.md: the status follows the lag at the
	// sweep), and then the heartbeat and the deregistration. Before it, a
	// loaded machine may have let the server lag between the calls.
	trail := strings.Join(kinds, " ")
	if !silenceTrail.MatchString(trail) {
		t.Fatalf("audit trail %q", trail)
	}
	// Another tenant sees none of it.
	other := p.client(t, uuid.New())
	if _, err := other.Server(ctx, srv.ServerID); !errors.As(err, &prob) || prob.Status != http.StatusNotFound {
		t.Fatalf("other tenant: %v", err)
	}

	metrics := get(t, "http://"+p.addr+"/metrics")
	for _, want := range []string{`mcpd_servers{status="deregistered"}`, `mcpd_transitions_total{from="` + string(unhealthyFrom) + `",to="unhealthy"}`,
		`mcpd_heartbeats_total{result="deregistered"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	logs := p.stderr.String()
	// At info level: the first heartbeat and the recovery, each with the
	// trace id; the others are debug lines. A first heartbeat that came
	// 2I late was itself a recovery, logged as one.
	msgs := []string{"heartbeat changed status"}
	if onTimeTrail.MatchString(trail) {
		msgs = append(msgs, "first heartbeat")
	}
	for _, msg := range msgs {
		if !logLineWith(logs, `"msg":"`+msg+`"`, `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
			t.Fatalf("no %q line with the trace id in the log:\n%s", msg, logs)
		}
	}
	if strings.Contains(logs, `"msg":"heartbeat"`) {
		t.Fatal("a heartbeat that changed nothing is logged at info level")
	}
	assertNoErrorLogs(t, "mcpd", logs)
}

func TestSIGTERMExitsZero(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	p := startMcpd(t, db.AppURL)
	c := p.client(t, uuid.New())
	ctx := context.Background()
	srv, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "mail", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	// Heartbeats in flight while the signal comes either succeed or fail
	// to connect; none is cut off with a 5xx.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	var bad []string
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 500; n++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := c.Heartbeat(ctx, srv.ServerID)
				var prob *api.Problem
				if errors.As(err, &prob) {
					mu.Lock()
					bad = append(bad, prob.Error())
					mu.Unlock()
				}
				if err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let some heartbeats be in flight
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(pollCap):
		t.Fatal("mcpd did not exit after SIGTERM")
	}
	close(stop)
	wg.Wait()
	if p.err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", p.err, p.stderr.String())
	}
	if p.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("exit code %d", p.cmd.ProcessState.ExitCode())
	}
	if len(bad) > 0 {
		t.Fatalf("problems during the drain: %v", bad)
	}
	if !strings.Contains(p.stderr.String(), `"msg":"mcpd stopped"`) {
		t.Fatalf("no stop log:\n%s", p.stderr.String())
	}
}

// TestSIGTERMWithTheDatabaseHung stops mcpd while its database hangs (its
// processes stopped, as on a host that froze): reads cut short at their
// deadline leave connections whose cancel requests the server never reads,
// and closing the pool waits for them (pgx gives each 15 s). The stop still
// ends within --shutdown-timeout, and, cut off, exits 1 (docs/mcpd.md).
func TestSIGTERMWithTheDatabaseHung(t *testing.T) {
	t.Parallel()
	const shutdown = 2 * time.Second
	// What the exit may take beyond the timeout: a loaded machine.
	const slack = 3 * time.Second
	cluster := pgtest.NewCluster(t)
	db := cluster.NewDB(t)
	p := startMcpd(t, db.AppURL, "--shutdown-timeout", shutdown.String())
	c := p.client(t, uuid.New())
	ctx := context.Background()
	ids := registerN(t, []*client.Client{c}, "hung", 2, 1)
	cluster.Freeze(t)
	for _, id := range ids {
		if _, err := c.Server(ctx, id); !isUnavailable(err) {
			t.Fatalf("a read with the database hung: %v, want 503", err)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-p.done:
	case <-time.After(shutdown + slack + pollCap):
		t.Fatal("mcpd did not exit after SIGTERM")
	}
	took := time.Since(start)
	if took > shutdown+slack {
		t.Fatalf("mcpd exited %s after SIGTERM with --shutdown-timeout %s", took.Round(time.Millisecond), shutdown)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit code %d after a stop cut off, want 1", code)
	}
	if !logLineWith(p.stderr.String(), `"msg":"mcpd stopped"`, `"err":`) {
		t.Fatalf("no stop log with the error:\n%s", p.stderr.String())
	}
	t.Logf("mcpd exited 1 %s after SIGTERM with the database hung (--shutdown-timeout %s)", took.Round(time.Millisecond), shutdown)
}

func TestDatabaseRestartSurvived(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	db := cluster.NewDB(t)
	p := startMcpd(t, db.AppURL)
	c := p.client(t, uuid.New())
	ctx := context.Background()
	srv, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "calendar", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, srv.ServerID); err != nil {
		t.Fatal(err)
	}

	cluster.Stop(t)
	unavailable := func(err error) bool {
		var prob *api.Problem
		return errors.As(err, &prob) && prob.Status == http.StatusServiceUnavailable && prob.RetryAfter >= time.Second && prob.RetryAfter <= 3*time.Second &&
			prob.Type == api.ProblemUnavailable
	}
	testwait.Eventually(t, "heartbeat 503 with Retry-After while the database is down", func() bool {
		_, err := c.Heartbeat(ctx, srv.ServerID)
		return unavailable(err)
	})
	if _, err := c.Server(ctx, srv.ServerID); !unavailable(err) {
		t.Fatalf("get server while down: %v", err)
	}
	if _, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "mail", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, ""); !unavailable(err) {
		t.Fatalf("register while down: %v", err)
	}
	if err := c.Readyz(ctx); !unavailable(err) {
		t.Fatalf("readyz while down: %v", err)
	}
	if err := c.Healthz(ctx); err != nil {
		t.Fatalf("healthz while down: %v", err)
	}

	cluster.Start(t)
	testwait.Eventually(t, "ready again", func() bool { return c.Readyz(ctx) == nil })
	testwait.Eventually(t, "heartbeat again", func() bool {
		hb, err := c.Heartbeat(ctx, srv.ServerID)
		return err == nil && hb.Status == registry.StatusHealthy
	})
	if _, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "mail", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, ""); err != nil {
		t.Fatalf("register after restart: %v", err)
	}
	if !p.running() {
		t.Fatalf("mcpd exited: %v", p.err)
	}
}

// silenceTrail is TestLifecycleOverHTTP's audit trail: the registrations
// (and what a slow machine made of the time between them), the silence to
// unhealthy, the recovery and the deregistration.
var silenceTrail = regexp.MustCompile(`^registered( registered| degraded| unhealthy| recovered)* (degraded )?unhealthy recovered( degraded| unhealthy| recovered)* deregistered$`)

// onTimeTrail is a silenceTrail in which no call came late: the first
// heartbeat found the server healthy.
var onTimeTrail = regexp.MustCompile(`^registered registered (degraded )?unhealthy recovered`)

func get(t *testing.T, url string) string {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// logLineWith reports whether one line of logs holds every part.
func logLineWith(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
