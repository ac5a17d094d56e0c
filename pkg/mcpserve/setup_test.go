package mcpserve_test

import (
	"bytes"
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/limit"
	"github.com/cyberos/mcpd/pkg/mcpserve"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

const (
	testInterval = 10 * time.Second
	rev2026      = "2026-07-28"
	rev2025      = "2025-11-25"
)

var revisions = []string{rev2026, rev2025}

// env is a real mcpd handler (API and /mcp) on a loopback listener, over a
// store with a fake clock.
type env struct {
	url     string
	store   testStore
	clock   *clockwork.FakeClock
	reg     *lifecycle.Registrar
	monitor *lifecycle.Monitor
	mcp     *mcpserve.Handler
	secret  []byte
	logs    *testlog.Buffer
}

type envOptions struct {
	// store makes the store; nil: memstore.
	store func(t testing.TB, clock clockwork.Clock) testStore
	// interval is the heartbeat interval; zero: testInterval.
	interval time.Duration
	// limits are the tenants' limits; nil: none.
	limits *limit.Tenants
	// streams ends the streams when done; nil: never.
	streams context.Context
	// maxSessions bounds a tenant's sessions; zero: the default.
	maxSessions int
	// maxPerSubject bounds a subject's sessions; zero: the default.
	maxPerSubject int
	// keepAlive is the streams' keepalive; zero: 200 ms, so that every
	// test's client reads keepalives between its events.
	keepAlive time.Duration
	// tokenClock times token expiry; nil: the real clock.
	tokenClock clockwork.Clock
}

// testStore is a store the monitor can sweep.
type testStore interface {
	store.Store
	store.LiveCounter
}

func setup(t testing.TB, opts ...envOptions) *env {
	t.Helper()
	var o envOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	clock := clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC))
	var store testStore
	if o.store != nil {
		store = o.store(t, clock)
	} else {
		store = memstore.New(clock)
	}
	interval := o.interval
	if interval == 0 {
		interval = testInterval
	}
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, Logger: logger,
		Sink: lifecycle.LogSink{Logger: logger}, HeartbeatInterval: interval})
	mon := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: store, Logger: logger, Clock: clock,
		Sink: lifecycle.LogSink{Logger: logger}, HeartbeatInterval: interval, Period: interval / 2,
		// The tests sweep by hand, with gaps a running monitor never has.
		BlindAfter: -1})
	// The hub reads on the real clock: the store says when an event
	// commits (memstore) or is polled every 100 ms (PostgreSQL).
	// Bookmarks, when a tenant's follower checks whether it still serves
	// anyone, come often.
	hub := feed.NewHub(feed.Options{Source: store, Logger: logger, BookmarkInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	secret := bytes.Repeat([]byte("k"), 32)
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	mh := mcpserve.New(mcpserve.Options{Reader: mcpserve.Reader{ServerSource: reg, SkillSource: reg.Store()}, Feed: hub, Clock: clock, Version: "1.2.3-test", Logger: logger,
		Streams: o.streams, MaxSessions: o.maxSessions, MaxSessionsPerSubject: o.maxPerSubject,
		KeepAlive: cmp.Or(o.keepAlive, 200*time.Millisecond), TokenClock: o.tokenClock})
	t.Cleanup(mh.Close)
	h := api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier, Logger: logger, Feed: hub, MCP: mh,
		Limits: o.limits})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{url: srv.URL + "/mcp", store: store, clock: clock, reg: reg, monitor: mon, mcp: mh, secret: secret, logs: logs}
}

func (e *env) token(t testing.TB, tenant uuid.UUID, scope string) string {
	t.Helper()
	return e.tokenOf(t, tenant, "test", scope, time.Hour)
}

// tokenOf issues a token of subject sub (empty: none) that lives for ttl.
func (e *env) tokenOf(t testing.TB, tenant uuid.UUID, sub, scope string, ttl time.Duration) string {
	t.Helper()
	return e.tokenAt(t, tenant, sub, scope, ttl, time.Now())
}

// tokenAt is tokenOf issued at now.
func (e *env) tokenAt(t testing.TB, tenant uuid.UUID, sub, scope string, ttl time.Duration, now time.Time) string {
	t.Helper()
	tok, err := auth.Issue(e.secret, tenant, sub, scope, ttl, now)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (e *env) register(t testing.TB, tenant uuid.UUID, module string, skills ...string) registry.Server {
	t.Helper()
	info := registry.ServerInfo{ModuleName: module, Version: "1.0.0", SupportedProtocols: []string{rev2025},
		Remotes: []registry.Remote{{Type: registry.RemoteStreamableHTTP, URL: remoteURL(module)}}}
	for _, s := range skills {
		info.Skills = append(info.Skills, registry.SkillInfo{Name: s})
	}
	srv, _, err := e.reg.Register(t.Context(), tenant, info)
	if err != nil {
		t.Fatalf("register %s: %v", module, err)
	}
	return srv
}

func (e *env) heartbeat(t testing.TB, tenant, id uuid.UUID) {
	t.Helper()
	if _, err := e.reg.Heartbeat(t.Context(), tenant, id); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
}

// sweep advances the fake clock by d and sweeps.
func (e *env) sweep(t testing.TB, d time.Duration) []registry.Event {
	t.Helper()
	e.clock.Advance(d)
	evs, err := e.monitor.Sweep(t.Context(), e.clock.Now())
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	return evs
}

// remoteURL is where the tests say a module is reached.
func remoteURL(module string) string { return "https://" + module + ".example/mcp" }

// hasRemote reports whether p carries its module's remote.
func hasRemote(p mcpserve.Provider) bool {
	return len(p.Remotes) == 1 && p.Remotes[0].Type == registry.RemoteStreamableHTTP &&
		p.Remotes[0].URL == remoteURL(p.ModuleName)
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// recorder keeps what a client session was told.
type recorder struct {
	mu          sync.Mutex
	updated     []string
	at          []time.Time // the fake clock at each update
	listChanged int
	clock       clockwork.Clock
}

func (r *recorder) updates(uri string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, u := range r.updated {
		if u == uri {
			n++
		}
	}
	return n
}

func (r *recorder) lists() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listChanged
}

// connect opens a session of the Go SDK's client on revision rev with
// token.
func (e *env) connect(t *testing.T, token, rev string) (*mcp.ClientSession, *recorder) {
	t.Helper()
	cs, rec, err := e.tryConnect(t, token, rev)
	if err != nil {
		t.Fatalf("connect (%s): %v", rev, err)
	}
	return cs, rec
}

func (e *env) tryConnect(t *testing.T, token, rev string) (*mcp.ClientSession, *recorder, error) {
	t.Helper()
	rec := &recorder{clock: e.clock}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpd-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			rec.mu.Lock()
			rec.updated = append(rec.updated, req.Params.URI)
			rec.at = append(rec.at, rec.clock.Now())
			rec.mu.Unlock()
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			rec.mu.Lock()
			rec.listChanged++
			rec.mu.Unlock()
		},
	})
	transport := &mcp.StreamableClientTransport{
		Endpoint:   e.url,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}},
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != rev {
		t.Fatalf("negotiated %s, want %s", got, rev)
	}
	return cs, rec, nil
}

// providerModules returns the module names of a find_skill answer, in order.
func providerModules(p mcpserve.Providers) []string {
	var out []string
	for _, pr := range p.Providers {
		out = append(out, pr.ModuleName)
	}
	return out
}

func sameStrings(a, b []string) bool { return slices.Equal(a, b) }
