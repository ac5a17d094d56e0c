package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = bytes.Repeat([]byte("s"), 32)

// setup serves the real handler over a memstore on loopback and returns a
// client with a read-write token of a fresh tenant.
func setup(tb testing.TB) (*client.Client, *httptest.Server) {
	tb.Helper()
	store := memstore.New(clockwork.NewRealClock())
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret})
	if err != nil {
		tb.Fatal(err)
	}
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store})
	srv := httptest.NewServer(api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier, Pinger: store}))
	tb.Cleanup(srv.Close)
	c := client.New(srv.URL+"/", token(tb, uuid.New(), "mcp:read mcp:write"))
	tb.Cleanup(c.CloseIdleConnections)
	return c, srv
}

func token(tb testing.TB, tenant uuid.UUID, scope string) string {
	tb.Helper()
	tok, err := auth.Issue(secret, tenant, "client-test", scope, time.Hour, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func registerReq(module string, skills ...string) api.RegisterRequest {
	r := api.RegisterRequest{ModuleName: module, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}
	for _, s := range skills {
		r.Skills = append(r.Skills, registry.SkillInfo{Name: s})
	}
	return r
}

func TestLifecycle(t *testing.T) {
	c, _ := setup(t)
	ctx := context.Background()
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	srv, created, err := c.Register(ctx, registerReq("calendar", "search"), tp)
	if err != nil || !created {
		t.Fatalf("register: created %v err %v", created, err)
	}
	if srv.TraceID != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("trace id %q", srv.TraceID)
	}
	again, created, err := c.Register(ctx, registerReq("calendar", "search"), "")
	if err != nil || created || again.ServerID != srv.ServerID {
		t.Fatalf("re-register: created %v id %s err %v", created, again.ServerID, err)
	}
	if hb, err := c.Heartbeat(ctx, srv.ServerID); err != nil || hb.Status != registry.StatusHealthy {
		t.Fatalf("heartbeat: %+v %v", hb, err)
	}
	if got, err := c.Server(ctx, srv.ServerID); err != nil || got.ModuleName != "calendar" {
		t.Fatalf("server: %+v %v", got, err)
	}
	skills, err := c.Skills(ctx, srv.ServerID)
	if err != nil || len(skills) != 1 || skills[0].Name != "search" || !skills[0].Available {
		t.Fatalf("skills: %+v %v", skills, err)
	}
	dereg, err := c.Deregister(ctx, srv.ServerID)
	if err != nil || dereg.Status != registry.StatusDeregistered {
		t.Fatalf("deregister: %+v %v", dereg, err)
	}
	_, err = c.Heartbeat(ctx, srv.ServerID)
	var p *api.Problem
	if !errors.As(err, &p) || p.Status != http.StatusConflict || p.Type != api.ProblemDeregistered {
		t.Fatalf("heartbeat after deregister: %v", err)
	}
	events, err := c.Events(ctx, client.ListEventsParams{ServerID: srv.ServerID.String(), Kind: string(registry.KindDeregistered)})
	if err != nil || len(events.Events) != 1 {
		t.Fatalf("events: %+v %v", events, err)
	}
	if err := c.Healthz(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Readyz(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPaging(t *testing.T) {
	c, _ := setup(t)
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		if _, _, err := c.Register(ctx, registerReq(fmt.Sprintf("m%02d", i)), ""); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.Servers(ctx, client.ListServersParams{Limit: 3})
	if err != nil || len(page.Servers) != 3 || page.NextCursor == nil {
		t.Fatalf("first page: %d servers, next %v, err %v", len(page.Servers), page.NextCursor, err)
	}
	all, err := c.AllServers(ctx, client.ListServersParams{Limit: 2})
	if err != nil || len(all) != 7 {
		t.Fatalf("all: %d %v", len(all), err)
	}
	for i, s := range all {
		if s.ModuleName != fmt.Sprintf("m%02d", i) {
			t.Fatalf("all[%d] = %s", i, s.ModuleName)
		}
	}
	one, err := c.Servers(ctx, client.ListServersParams{ModuleName: "m03", Status: "healthy"})
	if err != nil || len(one.Servers) != 1 {
		t.Fatalf("filtered: %+v %v", one, err)
	}
	evs, err := c.Events(ctx, client.ListEventsParams{Limit: 5})
	if err != nil || len(evs.Events) != 5 || evs.NextCursor == nil {
		t.Fatalf("events page: %d %v", len(evs.Events), err)
	}
	rest, err := c.Events(ctx, client.ListEventsParams{Limit: 5, Cursor: *evs.NextCursor})
	if err != nil || len(rest.Events) != 2 || rest.NextCursor != nil {
		t.Fatalf("events rest: %d %v", len(rest.Events), err)
	}
}

func TestProblems(t *testing.T) {
	c, srv := setup(t)
	ctx := context.Background()

	_, _, err := c.Register(ctx, registerReq("Bad"), "")
	var p *api.Problem
	if !errors.As(err, &p) || p.Status != 400 || p.Field != "module_name" || p.Type != api.ProblemValidation {
		t.Fatalf("validation: %#v", err)
	}
	if !strings.Contains(p.Error(), "Invalid input") {
		t.Fatalf("Error() %q", p.Error())
	}
	_, err = c.Server(ctx, uuid.New())
	if !errors.As(err, &p) || p.Status != 404 {
		t.Fatalf("not found: %v", err)
	}
	_, err = client.New(srv.URL, "").Servers(ctx, client.ListServersParams{})
	if !errors.As(err, &p) || p.Status != 401 {
		t.Fatalf("no token: %v", err)
	}
	_, err = client.New(srv.URL, token(t, uuid.New(), "mcp:read")).Heartbeat(ctx, uuid.New())
	if !errors.As(err, &p) || p.Status != 403 {
		t.Fatalf("read-only heartbeat: %v", err)
	}
}

func TestSynthesizedProblemAndRetryAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.Header().Set("Content-Type", api.ContentTypeProblem)
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"https://mcpd.dev/problems/unavailable","title":"Service unavailable","status":503,"detail":"down"}`))
		default:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>bad gateway from a proxy</html>"))
		}
	}))
	defer srv.Close()
	c := client.New(srv.URL, "t")
	defer c.CloseIdleConnections()
	err := c.Readyz(context.Background())
	var p *api.Problem
	if !errors.As(err, &p) || p.Status != 503 || p.RetryAfter != 3*time.Second || p.Detail != "down" {
		t.Fatalf("readyz: %#v", err)
	}
	err = c.Healthz(context.Background())
	if !errors.As(err, &p) || p.Status != 502 || p.Title != "Bad Gateway" || p.Type != "about:blank" ||
		!strings.Contains(p.Detail, "bad gateway from a proxy") {
		t.Fatalf("synthesized: %#v", err)
	}
}

func TestTransportErrorIsWrapped(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := client.New(url, "t")
	defer c.CloseIdleConnections()
	_, err := c.Heartbeat(context.Background(), uuid.New())
	var p *api.Problem
	if err == nil || errors.As(err, &p) || !strings.HasPrefix(err.Error(), "heartbeat: ") {
		t.Fatalf("transport error: %v", err)
	}
}

func TestOptions(t *testing.T) {
	var gotUA string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUA = r.UserAgent()
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	if err := client.New(srv.URL, "", client.WithHTTPClient(hc), client.WithUserAgent("probe/1")).Healthz(context.Background()); err != nil {
		t.Fatal(err)
	}
	if gotUA != "probe/1" {
		t.Fatalf("User-Agent %q", gotUA)
	}
}
