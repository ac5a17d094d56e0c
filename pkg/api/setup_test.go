package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/limit"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

const testInterval = 10 * time.Second

// bundle is what a handler test needs: the handler over a memstore with a
// fake clock, a tenant and its tokens.
type bundle struct {
	handler  http.Handler
	store    store.Store
	clock    *clockwork.FakeClock
	monitor  *lifecycle.Monitor
	metrics  *api.Metrics
	secret   []byte
	tenant   uuid.UUID
	token    string // mcp:read mcp:write
	readTok  string // mcp:read
	logs     *testlog.Buffer
	registry *lifecycle.Registrar
	// hub is the change-feed hub when setupOptions.feed; else nil.
	hub *feed.Hub
}

// testStore is what the tests' stores offer: the API's store, with the
// monitor's live counts and the metrics' status counts.
type testStore interface {
	store.Store
	store.LiveCounter
	store.StatusCounter
	store.CatalogReader
}

type setupOptions struct {
	store          func(clock clockwork.Clock) testStore // nil: memstore
	pinger         api.Pinger
	requestTimeout time.Duration
	limits         *limit.Tenants
	maxServers     int
	// feed runs a change-feed hub over the store, told of the handler's
	// own writes (the MCP registry API's ETag).
	feed bool
	// public makes the bundle's tenant the public tenant of /v0.1.
	public bool
	// clockedHandler gives the handler the bundle's fake clock
	// (TokenClock): the end of watch streams and the logs' thinning.
	clockedHandler bool
}

func setup(t *testing.T, opts ...setupOptions) *bundle {
	t.Helper()
	var o setupOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	clock := clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC))
	var store testStore = memstore.New(clock)
	if o.store != nil {
		store = o.store(clock)
	}
	secret := bytes.Repeat([]byte("k"), 32)
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	metrics := api.NewMetrics(api.MetricsOptions{Counter: store, Logger: logger})
	sink := metrics.Sink(lifecycle.LogSink{Logger: logger})
	var hub *feed.Hub
	if o.feed {
		hub = feed.NewHub(feed.Options{Source: store, Logger: logger})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); hub.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		sink = hub.Sink(sink) // as mcpd does
		// Writes after the hub's first horizon, as in a running mcpd: one
		// that commits before it and is told after counts as this
		// handler's own until feed.PendingTTL (a minute), setting its tags
		// apart.
		testwait.Eventually(t, "the hub starts", func() bool {
			_, err := hub.TenantVersion(t.Context(), uuid.New(), store)
			return !errors.Is(err, feed.ErrNotStarted)
		})
	}
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, Sink: sink, Logger: logger,
		HeartbeatInterval: testInterval, MaxServersPerTenant: o.maxServers})
	mon := lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: store, Sink: sink, Logger: logger, Clock: clock,
		HeartbeatInterval: testInterval, Period: testInterval / 2, Observe: metrics.ObserveSweep})
	pinger := o.pinger
	if pinger == nil {
		pinger = store
	}
	tenant, public := uuid.New(), uuid.Nil
	if o.public {
		public = tenant
	}
	hopts := api.HandlerOptions{Registrar: reg, Verifier: verifier, Logger: logger, Metrics: metrics,
		Pinger: pinger, RequestTimeout: o.requestTimeout, Limits: o.limits, Catalog: store, Feed: hub,
		RegistryPublicTenant: public}
	if o.clockedHandler {
		hopts.TokenClock = clock
	}
	h := api.NewHandler(hopts)
	b := &bundle{handler: h, store: store, clock: clock, monitor: mon, metrics: metrics, secret: secret,
		tenant: tenant, logs: logs, registry: reg, hub: hub}
	b.token = b.issue(t, b.tenant, "mcp:read mcp:write")
	b.readTok = b.issue(t, b.tenant, "mcp:read")
	return b
}

func (b *bundle) issue(t *testing.T, tenant uuid.UUID, scope string) string {
	t.Helper()
	tok, err := auth.Issue(b.secret, tenant, "test", scope, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// response is a recorded answer.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// req describes one request; zero fields take the defaults of do.
type req struct {
	method string
	path   string
	body   string
	token  string // "-": no Authorization header
	ctype  string // "-": no Content-Type
	header map[string]string
	// also are headers added after the others (a second value).
	also map[string]string
}

func (b *bundle) do(t *testing.T, r req) response {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodGet
		if r.body != "" {
			r.method = http.MethodPost
		}
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	switch r.token {
	case "":
		hr.Header.Set("Authorization", "Bearer "+b.token)
	case "-":
	default:
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	switch r.ctype {
	case "":
		if r.method == http.MethodPost {
			hr.Header.Set("Content-Type", "application/json")
		}
	case "-":
	default:
		hr.Header.Set("Content-Type", r.ctype)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	for k, v := range r.also {
		hr.Header.Add(k, v)
	}
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, hr)
	return response{code: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func (b *bundle) post(t *testing.T, path, body string) response {
	t.Helper()
	return b.do(t, req{method: http.MethodPost, path: path, body: body})
}

func (b *bundle) get(t *testing.T, path string) response {
	t.Helper()
	return b.do(t, req{path: path})
}

const registerPath = "/v1/mcp/servers/register"

func registerBody(module string, skills ...string) string {
	r := api.RegisterRequest{ModuleName: module, Version: "1.3.2", SupportedProtocols: []string{"2025-06-18"}}
	for _, s := range skills {
		r.Skills = append(r.Skills, registry.SkillInfo{Name: s})
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// register registers module for the bundle's tenant and returns the server.
func (b *bundle) register(t *testing.T, module string, skills ...string) registry.Server {
	t.Helper()
	resp := b.post(t, registerPath, registerBody(module, skills...))
	if resp.code != http.StatusCreated && resp.code != http.StatusOK {
		t.Fatalf("register %s: %d %s", module, resp.code, resp.body)
	}
	return decode[registry.Server](t, resp)
}

func decode[T any](t *testing.T, resp response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(resp.body, &v); err != nil {
		t.Fatalf("decode %T from %d %s: %v", v, resp.code, resp.body, err)
	}
	return v
}

// wantProblem checks that resp is a problem with status (and field, when
// not empty) and returns it.
func wantProblem(t *testing.T, resp response, status int, field string) api.Problem {
	t.Helper()
	if resp.code != status {
		t.Fatalf("status %d, want %d: %s", resp.code, status, resp.body)
	}
	if ct := resp.header.Get("Content-Type"); ct != api.ContentTypeProblem {
		t.Fatalf("Content-Type %q, want %q", ct, api.ContentTypeProblem)
	}
	var p api.Problem
	if err := json.Unmarshal(resp.body, &p); err != nil {
		t.Fatalf("problem %s: %v", resp.body, err)
	}
	if p.Status != status || p.Type == "" || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem lacks type/title/status/detail: %s", resp.body)
	}
	if !strings.HasPrefix(p.Type, api.ProblemTypeBase) {
		t.Fatalf("problem type %q not under %s", p.Type, api.ProblemTypeBase)
	}
	if field != "" && p.Field != field {
		t.Fatalf("problem field %q, want %q: %s", p.Field, field, resp.body)
	}
	return p
}

// noneToken is an unsigned token (alg none) with valid claims.
func noneToken(tenant uuid.UUID) string {
	enc := base64.RawURLEncoding.EncodeToString
	header := enc([]byte(`{"alg":"none","typ":"JWT"}`))
	claims := enc([]byte(`{"tenant_id":"` + tenant.String() + `","scope":"mcp:read mcp:write","exp":` +
		jsonNumber(time.Now().Add(time.Hour).Unix()) + `}`))
	return header + "." + claims + "."
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// faultStore is a memstore whose Heartbeat and Server answer with err, or
// run fn when set.
type faultStore struct {
	*memstore.Store
	err error
	fn  func(ctx context.Context) error
}

func (s *faultStore) fail(ctx context.Context) error {
	if s.fn != nil {
		return s.fn(ctx)
	}
	return s.err
}

func (s *faultStore) Heartbeat(ctx context.Context, tenant, id uuid.UUID) (registry.Server, *registry.Event, error) {
	return registry.Server{}, nil, s.fail(ctx)
}

func (s *faultStore) Server(ctx context.Context, tenant, id uuid.UUID) (registry.Server, error) {
	return registry.Server{}, s.fail(ctx)
}

func (s *faultStore) Catalog(ctx context.Context, tenant uuid.UUID, f registry.CatalogFilter) (registry.CatalogPage, error) {
	return registry.CatalogPage{}, s.fail(ctx)
}
