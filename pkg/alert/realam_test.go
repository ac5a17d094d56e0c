package alert_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/alert"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

const installAlertmanager = "apt-get install prometheus-alertmanager"

var (
	installOnce sync.Once
	installOut  []byte
	installErr  error
)

// findAlertmanager returns the path of Alertmanager's binary. Under CI
// (CI=true) as root it installs the Debian package once when missing, and
// never skips; elsewhere a missing binary skips the test.
func findAlertmanager(t *testing.T) string {
	t.Helper()
	look := func() string {
		for _, name := range []string{"prometheus-alertmanager", "alertmanager"} {
			if p, err := exec.LookPath(name); err == nil {
				return p
			}
		}
		for _, p := range []string{"/usr/bin/prometheus-alertmanager", "/usr/bin/alertmanager"} {
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p
			}
		}
		return ""
	}
	if p := look(); p != "" {
		return p
	}
	if os.Getenv("CI") != "true" {
		t.Skipf("Alertmanager not found (prometheus-alertmanager or alertmanager on PATH): install it with `%s` to run this test", installAlertmanager)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("Alertmanager not found and CI=true, not root: install it with `%s`", installAlertmanager)
	}
	installOnce.Do(func() {
		update := exec.Command("apt-get", "update", "-qq")
		if installOut, installErr = update.CombinedOutput(); installErr != nil {
			return
		}
		install := exec.Command("apt-get", "install", "-y", "-qq", "prometheus-alertmanager")
		install.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		installOut, installErr = install.CombinedOutput()
	})
	if installErr != nil {
		t.Fatalf("install Alertmanager (`%s`): %v\n%s", installAlertmanager, installErr, installOut)
	}
	if p := look(); p != "" {
		return p
	}
	t.Fatalf("Alertmanager still not found after `%s`", installAlertmanager)
	return ""
}

// startAlertmanager runs Alertmanager on a free loopback port with a null
// receiver and clustering off, until the test ends; it returns its URL.
func startAlertmanager(t *testing.T) string {
	t.Helper()
	bin := findAlertmanager(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(config, []byte("route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range 3 { // the port may be taken between choosing and binding it
		addr := freeAddr(t)
		var out bytes.Buffer
		cmd := exec.Command(bin,
			"--config.file="+config, "--storage.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		base := "http://" + addr
		if lastErr = waitReady(base, exited); lastErr == nil {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
				if t.Failed() {
					t.Logf("alertmanager output:\n%s", out.String())
				}
			})
			return base
		}
		_ = cmd.Process.Kill()
		<-exited
		lastErr = fmt.Errorf("%w\n%s", lastErr, out.String())
	}
	t.Fatalf("alertmanager did not become ready: %v", lastErr)
	return ""
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitReady(base string, exited <-chan error) error {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	var exitErr error
	ready := testwait.Wait(waitTimeout, func() bool {
		select {
		case err := <-exited:
			exitErr = fmt.Errorf("exited: %v", err)
			return true
		default:
		}
		resp, err := client.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	switch {
	case exitErr != nil:
		return exitErr
	case !ready:
		return fmt.Errorf("not ready within %v", waitTimeout)
	}
	return nil
}

// gettableAlert is what GET /api/v2/alerts returns of an alert.
type gettableAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

func activeAlerts(t *testing.T, client *http.Client, base string) []gettableAlert {
	t.Helper()
	resp, err := client.Get(base + "/api/v2/alerts?active=true&silenced=false&inhibited=false")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v2/alerts: %s", resp.Status)
	}
	var out []gettableAlert
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A real Alertmanager shows the alert active once the server turns
// unhealthy, and no longer once a heartbeat recovers it.
func TestRealAlertmanager(t *testing.T) {
	base := startAlertmanager(t)
	client := httpClient(t)
	ctx := t.Context()

	// The store's clock starts 40 s in the past so that the events happen
	// at about Alertmanager's now.
	clock := clockwork.NewFakeClockAt(time.Now().Add(-40 * time.Second))
	st := memstore.New(clock)
	tenant := uuid.New()
	srv, _, _, err := st.Register(ctx, tenant, serverInfo("calendar"), 0)
	if err != nil {
		t.Fatal(err)
	}
	dests, err := alert.NewDestinations([]string{base}, "", "", client)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := start(t, fast(alert.DispatcherOptions{Outbox: st, Destinations: dests}))

	clock.Advance(35 * time.Second)
	result, err := st.Sweep(ctx, store.SweepRequest{Now: time.Time{}, Interval: interval, Limit: 1000})
	evs := result.Events
	if err != nil || len(evs) != 1 {
		t.Fatalf("sweep: %v, %v", evs, err)
	}
	d.Transition(ctx, evs[0])

	want := map[string]string{
		"alertname": "MCPServerUnhealthy", "tenant_id": tenant.String(), "module_name": "calendar",
		"server_id": srv.ServerID.String(), "severity": "critical",
	}
	find := func() *gettableAlert {
		for _, a := range activeAlerts(t, client, base) {
			if fmt.Sprint(a.Labels) == fmt.Sprint(want) {
				return &a
			}
		}
		return nil
	}
	var got *gettableAlert
	testwait.Until(t, fmt.Sprintf("alert %v active", want), waitTimeout, func() bool { got = find(); return got != nil })
	if !got.StartsAt.Equal(evs[0].OccurredAt.Truncate(time.Millisecond)) || // Alertmanager keeps milliseconds
		got.Annotations["trace_id"] != srv.TraceID ||
		got.Annotations["summary"] != fmt.Sprintf("MCP server calendar of tenant %s is unhealthy", tenant) {
		t.Fatalf("active alert %+v", got)
	}

	clock.Advance(4 * time.Second) // about Alertmanager's now, not after it
	_, ev, err := st.Heartbeat(ctx, tenant, srv.ServerID)
	if err != nil || ev == nil {
		t.Fatalf("heartbeat: %v, %v", ev, err)
	}
	d.Transition(ctx, *ev)
	testwait.Until(t, "the alert resolved after the recovery", waitTimeout, func() bool { return find() == nil })
}

// A real Alertmanager shows MCPSkillUnavailable active once the last
// server offering the skill is unhealthy, and no longer once it recovers.
func TestRealAlertmanagerSkill(t *testing.T) {
	base := startAlertmanager(t)
	client := httpClient(t)
	ctx := t.Context()

	clock := clockwork.NewFakeClockAt(time.Now().Add(-40 * time.Second))
	st := memstore.New(clock)
	tenant := uuid.New()
	info := serverInfo("calendar")
	info.Skills = []registry.SkillInfo{{Name: "search"}}
	srv, _, _, err := st.Register(ctx, tenant, info, 0)
	if err != nil {
		t.Fatal(err)
	}
	dests, err := alert.NewDestinations([]string{base}, "", "", client)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := start(t, fast(alert.DispatcherOptions{Outbox: st, SkillAlerts: st, Destinations: dests}))

	clock.Advance(35 * time.Second)
	res, err := st.Sweep(ctx, store.SweepRequest{Interval: interval, Limit: 1000})
	evs := res.Events
	if err != nil || len(evs) != 1 {
		t.Fatalf("sweep: %v, %v", evs, err)
	}
	d.Transition(ctx, evs[0])

	want := map[string]string{
		"alertname": "MCPSkillUnavailable", "tenant_id": tenant.String(), "skill": "search", "severity": "critical",
	}
	find := func() *gettableAlert {
		for _, a := range activeAlerts(t, client, base) {
			if fmt.Sprint(a.Labels) == fmt.Sprint(want) {
				return &a
			}
		}
		return nil
	}
	var got *gettableAlert
	testwait.Poll(t, "the skill alert active", waitTimeout, func() error {
		if got = find(); got == nil {
			return fmt.Errorf("alert %v not active; active: %+v", want, activeAlerts(t, client, base))
		}
		return nil
	})
	if !got.StartsAt.Equal(evs[0].OccurredAt.Truncate(time.Millisecond)) ||
		got.Annotations["summary"] != fmt.Sprintf("skill %q of tenant %s is unavailable on every MCP server", "search", tenant) {
		t.Fatalf("active alert %+v", got)
	}

	clock.Advance(4 * time.Second)
	_, ev, err := st.Heartbeat(ctx, tenant, srv.ServerID)
	if err != nil || ev == nil {
		t.Fatalf("heartbeat: %v, %v", ev, err)
	}
	d.Transition(ctx, *ev)
	testwait.Poll(t, "the skill alert resolved after the recovery", waitTimeout, func() error {
		if a := find(); a != nil {
			return fmt.Errorf("still active: %+v", a)
		}
		return nil
	})
}
