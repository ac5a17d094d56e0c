package agent

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/mcpinspect"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// The registry's lifecycle in the tests: an interval of 200ms, so that a
// server is unhealthy 600ms after its last heartbeat.
const (
	testInterval = 200 * time.Millisecond
	testPeriod   = 50 * time.Millisecond
)

// testRegistry is the real API over a memstore, swept by a monitor, behind a
// switch that can make it fail or forget everything.
type testRegistry struct {
	url    string
	client *client.Client
	secret []byte
	tenant uuid.UUID

	mode       atomic.Value // registryMode
	heartbeats atomic.Int64

	mu      sync.Mutex
	handler http.Handler
	stopMon func()
}

type registryMode string

// Failure modes hit the agent's calls (POSTs) only, so that the test can
// still read the registry.
const (
	registryUp    registryMode = "up"
	registry503   registryMode = "503"   // answered 503
	registryReset registryMode = "reset" // connection dropped
)

func setupRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{secret: []byte(strings.Repeat("k", 16) + uuid.NewString()[:16]), tenant: uuid.New()}
	r.mode.Store(registryUp)
	r.restartEmpty(t)
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	token, err := auth.Issue(r.secret, r.tenant, "agent-test", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.url = srv.URL
	r.client = client.New(srv.URL, token)
	t.Cleanup(func() {
		r.client.CloseIdleConnections()
		srv.CloseClientConnections()
		srv.Close()
		r.mu.Lock()
		r.stopMon()
		r.mu.Unlock()
	})
	return r
}

// restartEmpty replaces the store with an empty one, as a restart of
// mcpd --dev does.
func (r *testRegistry) restartEmpty(t *testing.T) {
	t.Helper()
	store := memstore.New(clockwork.NewRealClock())
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, HeartbeatInterval: testInterval})
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: r.secret})
	if err != nil {
		t.Fatal(err)
	}
	// Blind-window protection off: at these compressed intervals a starved
	// test machine would open windows and hold back the marks tests wait for.
	mon := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: store, HeartbeatInterval: testInterval, Period: testPeriod, BlindAfter: -1})
	if err := mon.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopMon != nil {
		r.stopMon()
	}
	r.handler = api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier})
	r.stopMon = func() { _ = mon.Stop(context.Background()) }
}

func (r *testRegistry) serve(w http.ResponseWriter, req *http.Request) {
	mode := r.mode.Load().(registryMode)
	if req.Method != http.MethodPost {
		mode = registryUp
	}
	switch mode {
	case registry503:
		w.Header().Set("Content-Type", api.ContentTypeProblem)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"test: down"}`))
		return
	case registryReset:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
	}
	r.mu.Lock()
	h := r.handler
	r.mu.Unlock()
	h.ServeHTTP(w, req)
	// Counted once answered: a status read after it sees the heartbeat.
	if req.URL.Path == "/v1/mcp/servers/heartbeat" {
		r.heartbeats.Add(1)
	}
}

// server returns the registered server of module; ok false when there is none.
func (r *testRegistry) server(t *testing.T, module string) (registry.Server, bool) {
	t.Helper()
	all, err := r.client.AllServers(context.Background(), client.ListServersParams{ModuleName: module})
	if err != nil {
		t.Fatalf("list servers: %v", err)
	}
	for _, s := range all {
		if s.ModuleName == module {
			return s, true
		}
	}
	return registry.Server{}, false
}

func (r *testRegistry) skills(t *testing.T, id uuid.UUID) []registry.Skill {
	t.Helper()
	sk, err := r.client.Skills(context.Background(), id)
	if err != nil {
		t.Fatalf("skills: %v", err)
	}
	return sk
}

// waitStatus waits until module's server has status s.
func (r *testRegistry) waitStatus(t *testing.T, module string, s registry.Status, d time.Duration) registry.Server {
	t.Helper()
	var srv registry.Server
	testwait.Until(t, module+" "+string(s), d, func() bool {
		var ok bool
		srv, ok = r.server(t, module)
		return ok && srv.Status == s
	})
	return srv
}

// running is an agent running in the background.
type running struct {
	logs   *testlog.Buffer
	cancel context.CancelFunc
	errc   chan error
	once   sync.Once
	err    error
}

// stop cancels the agent and returns what Run returned.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.errc:
		case <-time.After(10 * time.Second):
			t.Fatal("the agent did not stop within 10s of its context's end")
		}
	})
	return r.err
}

// fastOptions are Options for tests: short waits throughout. A probe
// gets more than the test interval (a ping that a loaded machine answers
// late is not a server that hangs); a hung one still misses heartbeats.
func fastOptions(reg *testRegistry, module string, target mcpinspect.Target) Options {
	return Options{
		Module: module, Target: target, Registry: reg.client,
		ProbeTimeout: 500 * time.Millisecond, ConnectTimeout: 2 * time.Second, CallTimeout: time.Second,
		DeregisterTimeout: time.Second, TerminateGrace: 200 * time.Millisecond,
		RetryMin: 20 * time.Millisecond, RetryMax: 150 * time.Millisecond,
		RestartMin: 50 * time.Millisecond, RestartMax: 300 * time.Millisecond,
		ChangeDebounce: 20 * time.Millisecond,
	}
}

// start runs an agent with opts until the test ends.
func start(t *testing.T, opts Options) *running {
	t.Helper()
	logs := &testlog.Buffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{logs: logs, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- a.Run(ctx) }()
	t.Cleanup(func() {
		_ = r.stop(t)
		if t.Failed() {
			t.Logf("agent log:\n%s", logs)
		}
	})
	return r
}
