package toolhive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adrg/xdg"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/stacklok/toolhive/pkg/config"
	thv "github.com/stacklok/toolhive/pkg/registry"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
)

const interval = 10 * time.Second

// mcpd is an mcpd API over a memory store with a fake clock, whose
// tenant is the public tenant of /v0.1, as --registry-public-tenant makes
// it; it records the requests of /v0.1.
type mcpd struct {
	url     string
	token   string
	clock   *clockwork.FakeClock
	monitor *lifecycle.Monitor

	mu       sync.Mutex
	requests []string
}

func startMcpd(t *testing.T) *mcpd {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC))
	store := memstore.New(clock)
	secret := bytes.Repeat([]byte("k"), 32)
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	tenant := uuid.New()
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, HeartbeatInterval: interval})
	m := &mcpd{clock: clock, monitor: lifecycle.NewMonitor(lifecycle.MonitorOptions{Store: store, Clock: clock,
		HeartbeatInterval: interval, Period: interval / 2})}
	h := api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier, Catalog: store,
		RegistryPublicTenant: tenant})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v0.1/") {
			line := r.Method + " " + r.URL.RequestURI()
			if r.Header.Get("Authorization") != "" {
				line += " (with a token)"
			}
			m.mu.Lock()
			m.requests = append(m.requests, line)
			m.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	m.url = srv.URL
	if m.token, err = auth.Issue(secret, tenant, "test", "mcp:write", time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	return m
}

// call makes one /v1 call with the tenant's token and returns the server.
func (m *mcpd) call(t *testing.T, path, body string) registry.Server {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, m.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var srv registry.Server
	if resp.StatusCode >= 300 || json.NewDecoder(resp.Body).Decode(&srv) != nil {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
	return srv
}

func (m *mcpd) register(t *testing.T, module string, remote bool) registry.Server {
	t.Helper()
	remotes := ""
	if remote {
		remotes = fmt.Sprintf(`,"remotes":[{"type":"streamable-http","url":"https://%s.internal.example/mcp"}]`, module)
	}
	return m.call(t, "/v1/mcp/servers/register", fmt.Sprintf(
		`{"module_name":%q,"version":"1.3.2","supported_protocols":["2025-06-18"],"description":"The %s server"%s}`,
		module, module, remotes))
}

func (m *mcpd) heartbeat(t *testing.T, id uuid.UUID) {
	t.Helper()
	m.call(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+id.String()+`"}`)
}

func (m *mcpd) sweep(t *testing.T, d time.Duration) {
	t.Helper()
	m.clock.Advance(d)
	if _, err := m.monitor.Sweep(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// takeRequests returns the /v0.1 requests since the last call.
func (m *mcpd) takeRequests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.requests
	m.requests = nil
	return out
}

func names(t *testing.T, p thv.Provider) []string {
	t.Helper()
	servers, err := p.ListServers()
	if err != nil {
		t.Fatalf("ListServers: %v", err)
	}
	out := []string{}
	for _, s := range servers {
		out = append(out, s.GetName())
	}
	slices.Sort(out)
	return out
}

// ToolHive, pointed at mcpd as "thv config set-registry URL
// --allow-private-ip" points it (config registry_api_url), lists mcpd's live
// servers without a token through --registry-public-tenant. A server that
// dies or is deregistered stays in thv's cache (an hour) and leaves it at
// the next fetch: "thv registry list --refresh" (ForceRefresh), or the
// uncached API provider.
func TestToolHiveRegistryClient(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // thv's persistent cache
	xdg.Reload()
	m := startMcpd(t)
	calendar := m.register(t, "calendar", true)
	mail := m.register(t, "mail", true)
	search := m.register(t, "search", true)
	m.register(t, "local-only", false) // no remotes: thv skips it

	// What thv runs: NewRegistryProvider with the configuration that
	// set-registry writes for an API URL.
	cfg := &config.Config{RegistryApiUrl: m.url, AllowPrivateRegistryIp: true}
	p, err := thv.NewRegistryProvider(cfg, thv.WithInteractive(false))
	if err != nil {
		t.Fatalf("thv's provider for mcpd: %v", err)
	}
	cached, ok := p.(*thv.CachedAPIRegistryProvider)
	if !ok {
		t.Fatalf("provider %T, want thv's cached API provider", p)
	}
	want := []string{"local.mcpd/calendar", "local.mcpd/mail", "local.mcpd/search"}
	if got := names(t, p); !slices.Equal(got, want) {
		t.Fatalf("thv lists %v, want %v", got, want)
	}
	srv, err := p.GetServer("local.mcpd/calendar")
	if err != nil || srv.GetName() != "local.mcpd/calendar" || srv.GetDescription() != "The calendar server" || !srv.IsRemote() {
		t.Fatalf("thv's calendar: %+v, %v", srv, err)
	}
	reqs := m.takeRequests()
	t.Logf("thv's requests: %q", reqs)
	// Its probe pages through everything one server at a time (the
	// cursor as given), then it lists by 100.
	if len(reqs) != 5 || reqs[0] != "GET /v0.1/servers?limit=1&version=latest" ||
		!strings.HasPrefix(reqs[1], "GET /v0.1/servers?cursor=") || reqs[4] != "GET /v0.1/servers?limit=100&version=latest" {
		t.Fatalf("thv's requests %q: want the probe ?limit=1 page by page, then the list", reqs)
	}
	for _, r := range reqs {
		if strings.Contains(r, "with a token") {
			t.Fatalf("thv sent a token: %q", r)
		}
	}

	// mail is deregistered; calendar falls silent (unhealthy after 3
	// intervals) while search heartbeats.
	m.call(t, "/v1/mcp/servers/deregister", `{"server_id":"`+mail.ServerID.String()+`"}`)
	for range 4 {
		m.sweep(t, interval)
		m.heartbeat(t, search.ServerID)
	}
	// Within thv's cache hour, thv still lists them: its cache, not mcpd.
	if got := names(t, p); !slices.Equal(got, want) {
		t.Fatalf("thv's cache %v, want %v", got, want)
	}
	if reqs := m.takeRequests(); len(reqs) != 0 {
		t.Fatalf("thv read its cache with requests %q", reqs)
	}
	// Its next fetch drops both.
	if err := cached.ForceRefresh(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, p); !slices.Equal(got, []string{"local.mcpd/search"}) {
		t.Fatalf("thv after --refresh lists %v, want the live server only", got)
	}
	for _, name := range []string{"local.mcpd/calendar", "local.mcpd/mail", "calendar"} {
		if srv, err := p.GetServer(name); err == nil {
			t.Fatalf("thv still finds %s: %+v", name, srv)
		}
	}
	fresh, err := thv.NewAPIRegistryProvider(m.url, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, fresh); !slices.Equal(got, []string{"local.mcpd/search"}) {
		t.Fatalf("thv's uncached provider lists %v", got)
	}

	// A heartbeat brings calendar back at the next fetch.
	m.heartbeat(t, calendar.ServerID)
	if err := cached.ForceRefresh(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, p); !slices.Equal(got, []string{"local.mcpd/calendar", "local.mcpd/search"}) {
		t.Fatalf("thv after the heartbeat lists %v", got)
	}
}

// Without --registry-public-tenant, thv cannot read mcpd: 401, which it
// reports as a registry that needs authentication.
func TestToolHiveWithoutPublicTenant(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC))
	store := memstore.New(clock)
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store, HeartbeatInterval: interval})
	srv := httptest.NewServer(api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier, Catalog: store}))
	defer srv.Close()
	_, err = thv.NewAPIRegistryProvider(srv.URL, true, nil)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("thv against mcpd without a public tenant: %v, want its 401 error", err)
	}
	t.Logf("thv says: %v", err)
}
