package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/otlptest"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// The caller's trace of TestTracesReachTheCollector.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// spanAttrs are the attributes the rendered trees show.
var spanAttrs = []string{"http.route", "http.response.status_code", "db.system.name", "db.operation.name",
	"db.operation.batch.size", "mcpd.server.trace_id", "mcpd.sweep.transitions", "mcpd.sweep.degraded",
	"mcpd.sweep.unhealthy", "mcpd.alert.destination", "mcpd.alert.count", "mcpd.alert.firing"}

// TestTracesReachTheCollector: with OTEL_EXPORTER_OTLP_ENDPOINT set, mcpd
// on PostgreSQL exports its spans over OTLP/HTTP: a registration with a
// traceparent continues that trace (the server's trace_id is the
// caller's), its store statements are its children with
// db.system.name=postgresql and no parameter, a heartbeat's batch is the
// child of its request, each sweep is a trace with its counts, an alert
// delivery's traceparent reaches the webhook, no token or capability
// payload is in any attribute, and the last spans are flushed at stop.
// /metrics, /healthz and /readyz have no spans, and a sweep that changes
// nothing is no trace (issue 33: each was a trace of its own).
func TestTracesReachTheCollector(t *testing.T) {
	rcv := otlptest.NewReceiver(true)
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL())
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")

	var (
		hookMu      sync.Mutex
		traceparent []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hookMu.Lock()
		traceparent = append(traceparent, r.Header.Get("traceparent"))
		hookMu.Unlock()
	}))
	defer hook.Close()
	hooked := func() []string {
		hookMu.Lock()
		defer hookMu.Unlock()
		return append([]string(nil), traceparent...)
	}

	db := pgtest.NewDB(t)
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(t.TempDir(), "jwt.secret")
	if err := os.WriteFile(secretFile, []byte(hex.EncodeToString(raw)), 0o600); err != nil {
		t.Fatal(err)
	}
	secret, err := auth.ReadSecretFile(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	tenant := uuid.New()
	token, err := auth.Issue(secret, tenant, "test", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen, cfg.DatabaseURL, cfg.AuthJWTSecretFile = "127.0.0.1:0", db.AppURL, secretFile
	cfg.HeartbeatInterval, cfg.MonitorPeriod = 200*time.Millisecond, 50*time.Millisecond
	cfg.AlertWebhookURL = hook.URL
	var logs testlog.Buffer
	d, err := daemon.New(cfg, daemon.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = d.Stop(context.Background())
		}
	}()
	if !strings.Contains(logs.String(), `"traces":true`) {
		t.Fatalf("the start line does not say traces are on:\n%s", logs.String())
	}

	c := client.New("http://"+d.Addr(), token)
	defer c.CloseIdleConnections()
	ctx := context.Background()
	const capabilityMarker = "capability-payload-not-for-traces"
	srv, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "calendar", Version: "1.3.2",
		SupportedProtocols:      []string{"2025-06-18"},
		CapabilityAdvertisement: json.RawMessage(`{"tools":{"note":"` + capabilityMarker + `"}}`),
		Skills:                  []registry.SkillInfo{{Name: "search"}}},
		"00-"+callerTrace+"-"+callerSpan+"-01")
	if err != nil {
		t.Fatal(err)
	}
	if srv.TraceID != callerTrace {
		t.Fatalf("stored trace_id %s, want the traceparent's %s", srv.TraceID, callerTrace)
	}
	if _, err := c.Heartbeat(ctx, srv.ServerID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Servers(ctx, client.ListServersParams{}); err != nil {
		t.Fatal(err)
	}
	// A watch stream that starts, and ends when its client goes.
	wctx, cancelWatch := context.WithCancel(ctx)
	wreq, _ := http.NewRequestWithContext(wctx, http.MethodGet, "http://"+d.Addr()+"/v1/mcp/watch", nil)
	wreq.Header.Set("Authorization", "Bearer "+token)
	wresp, err := http.DefaultClient.Do(wreq)
	if err != nil || wresp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %v %v", wresp, err)
	}
	cancelWatch()
	_ = wresp.Body.Close()
	// Silent: the sweeps turn it degraded, then unhealthy, which the
	// webhook is told.
	testwait.Eventually(t, "the unhealthy alert at the webhook", func() bool { return len(hooked()) > 0 })
	// Probes and scrapes: no spans. Sweeps that change nothing, every 50 ms
	// from now on: no traces.
	for range 3 {
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			resp, err := http.Get("http://" + d.Addr() + path)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
	}
	time.Sleep(300 * time.Millisecond) // six idle sweeps at least
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped = true

	// Everything was exported by the stop: nothing is waited for.
	spans := rcv.Spans()
	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
		if s.Service != "mcpd" {
			t.Fatalf("span %q of service %q, want mcpd", s.Name, s.Service)
		}
		for k, v := range s.Attrs {
			if strings.Contains(v, capabilityMarker) || strings.Contains(v, token) || strings.Contains(v, "Bearer") {
				t.Fatalf("span %q attribute %s carries a payload or a token: %q", s.Name, k, v)
			}
		}
	}
	find := func(what string, match func(otlptest.Span) bool) otlptest.Span {
		t.Helper()
		for _, s := range spans {
			if match(s) {
				return s
			}
		}
		t.Fatalf("no span %s among %d", what, len(spans))
		return otlptest.Span{}
	}

	// No span for the probes and the scrape; no trace for a sweep that
	// changed nothing, nor for its statements (a span whose parent was
	// not exported). Before, each was a trace of its own.
	for _, s := range spans {
		switch {
		case s.Attrs["url.path"] == "/metrics" || s.Attrs["url.path"] == "/healthz" || s.Attrs["url.path"] == "/readyz":
			t.Errorf("a span %q for %s", s.Name, s.Attrs["url.path"])
		case s.Name == "sweep" && s.Attrs["mcpd.sweep.transitions"] == "0" && !s.Error:
			t.Errorf("a trace of a sweep that changed nothing: %v", s.Attrs)
		case s.ParentSpanID != "" && s.TraceID != callerTrace && byID[s.ParentSpanID].SpanID == "":
			t.Errorf("span %q: its parent %s was not exported", s.Name, s.ParentSpanID)
		}
	}

	// The registration continues the caller's trace, as the server's trace_id.
	reg := find("of the registration", func(s otlptest.Span) bool { return s.Name == api.RouteRegister })
	if reg.TraceID != callerTrace || reg.ParentSpanID != callerSpan || reg.Kind != "server" {
		t.Fatalf("register span trace %s parent %s kind %s, want %s, %s, server", reg.TraceID, reg.ParentSpanID, reg.Kind,
			callerTrace, callerSpan)
	}
	if reg.Attrs["mcpd.server.trace_id"] != callerTrace || reg.Attrs["http.response.status_code"] != "201" {
		t.Fatalf("register span attributes %v", reg.Attrs)
	}
	// Its statement, one call of mcp_register, is its child (with any
	// other of its statements), on PostgreSQL, without parameters.
	stmts, registerCall := 0, false
	for _, s := range spans {
		if s.TraceID != callerTrace || s.SpanID == reg.SpanID {
			continue
		}
		if !descends(byID, s, reg.SpanID) {
			t.Fatalf("span %q of the registration's trace does not descend from it", s.Name)
		}
		if s.Attrs["db.system.name"] != "postgresql" || s.Kind != "client" {
			t.Fatalf("span %q under the registration: %v", s.Name, s.Attrs)
		}
		if q := s.Attrs["db.query.text"]; strings.Contains(q, "calendar") || strings.Contains(q, tenant.String()) {
			t.Fatalf("statement text carries a parameter: %s", q)
		}
		registerCall = registerCall || strings.Contains(s.Attrs["db.query.text"], "mcp_register(")
		stmts++
	}
	if !registerCall {
		t.Fatalf("%d statement spans under the registration, none its call of mcp_register", stmts)
	}
	t.Logf("registration:\n%s", otlptest.Tree(spans, callerTrace, spanAttrs...))

	// The heartbeat: a trace of its own (no traceparent), the batch its child.
	hb := find("of the heartbeat", func(s otlptest.Span) bool { return s.Name == api.RouteHeartbeat })
	if hb.TraceID == callerTrace || hb.Attrs["mcpd.server.trace_id"] != callerTrace {
		t.Fatalf("heartbeat span trace %s attributes %v", hb.TraceID, hb.Attrs)
	}
	batch := find("of the heartbeat's batch", func(s otlptest.Span) bool { return s.Name == "heartbeat batch" })
	if batch.ParentSpanID != hb.SpanID || batch.Attrs["db.system.name"] != "postgresql" {
		t.Fatalf("batch span parent %s attributes %v, want the heartbeat's %s", batch.ParentSpanID, batch.Attrs, hb.SpanID)
	}
	t.Logf("heartbeat:\n%s", otlptest.Tree(spans, hb.TraceID, spanAttrs...))

	// A list says how many it returned; the watch stream is one span with
	// its start and end as events.
	list := find("of the list", func(s otlptest.Span) bool { return s.Name == api.RouteServers })
	if list.Attrs["mcpd.result.count"] != "1" || list.Attrs["mcpd.tenant_id"] != tenant.String() {
		t.Fatalf("list span attributes %v", list.Attrs)
	}
	watch := find("of the watch", func(s otlptest.Span) bool { return s.Name == api.RouteWatch })
	if strings.Join(watch.Events, ",") != "watch stream started,watch stream ended" {
		t.Fatalf("watch span events %q", watch.Events)
	}

	// Sweeps: each a root, with counts; one moved the server to unhealthy.
	sweep := find("of the sweep that found the server unhealthy", func(s otlptest.Span) bool {
		return s.Name == "sweep" && s.Attrs["mcpd.sweep.unhealthy"] == "1"
	})
	if sweep.ParentSpanID != "" || sweep.Attrs["mcpd.sweep.transitions"] != "1" {
		t.Fatalf("sweep span parent %q attributes %v", sweep.ParentSpanID, sweep.Attrs)
	}
	t.Logf("sweep:\n%s", otlptest.Tree(spans, sweep.TraceID, spanAttrs...))

	// The delivery: its span's context is the webhook request's
	// traceparent, and each alert it carried is the server's, with the
	// server's trace id. On a loaded machine the first delivery may carry
	// more than the unhealthy alert: a heartbeat answered later than 3I
	// after the registration makes the server unhealthy, then recovered.
	tp := hooked()[0]
	parts := strings.Split(tp, "-")
	if len(parts) != 4 {
		t.Fatalf("webhook traceparent %q", tp)
	}
	del := find("of the alert delivery "+tp, func(s otlptest.Span) bool {
		return s.Name == "alert delivery" && s.TraceID == parts[1] && s.SpanID == parts[2]
	})
	carried := strings.Split(del.Attrs["mcpd.alert.trace_ids"], ",")
	if del.Attrs["mcpd.alert.count"] != strconv.Itoa(len(carried)) || slices.ContainsFunc(carried, func(id string) bool {
		return id != callerTrace
	}) {
		t.Fatalf("webhook traceparent %s; delivery span %s/%s attributes %v, want every alert of trace %s",
			tp, del.TraceID, del.SpanID, del.Attrs, callerTrace)
	}
	t.Logf("alert delivery:\n%s", otlptest.Tree(spans, del.TraceID, spanAttrs...))
}

// descends reports whether s is a descendant of the span ancestor.
func descends(byID map[string]otlptest.Span, s otlptest.Span, ancestor string) bool {
	for range 32 {
		if s.ParentSpanID == ancestor {
			return true
		}
		p, ok := byID[s.ParentSpanID]
		if !ok {
			return false
		}
		s = p
	}
	return false
}

// TestNoTracesWhenUnset: without an OTLP endpoint in the environment, mcpd
// builds no exporter: nothing reaches the OTLP default port
// (127.0.0.1:4318, where the SDK would send by default), the start line
// says traces are off, and a registration still takes its traceparent's
// trace id.
func TestNoTracesWhenUnset(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	t.Setenv("OTEL_SERVICE_NAME", "mcpd-test")
	var (
		mu   sync.Mutex
		hits int
	)
	ln, err := net.Listen("tcp", "127.0.0.1:4318")
	if err != nil {
		pgtest.Missing(t, "the OTLP default port 127.0.0.1:4318 is taken ("+err.Error()+"); free it to run this test")
	}
	if ln != nil {
		srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			mu.Lock()
			hits++
			mu.Unlock()
		}), ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}

	var stdout, logs testlog.Buffer
	cfg := devConfig()
	d, err := daemon.New(cfg, daemon.Options{Stdout: &stdout, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := client.New("http://"+d.Addr(), tokenRE.FindStringSubmatch(stdout.String())[1])
	defer c.CloseIdleConnections()
	srv, _, err := c.Register(context.Background(), api.RegisterRequest{ModuleName: "calendar", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, "00-"+callerTrace+"-"+callerSpan+"-01")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(context.Background(), srv.ServerID); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if srv.TraceID != callerTrace {
		t.Fatalf("trace_id %s, want the traceparent's %s", srv.TraceID, callerTrace)
	}
	if !strings.Contains(logs.String(), `"traces":false`) {
		t.Fatalf("the start line does not say traces are off:\n%s", logs.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 0 {
		t.Fatalf("%d requests reached the OTLP default port with no endpoint set", hits)
	}
}
