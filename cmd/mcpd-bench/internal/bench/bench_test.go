package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/cmd/mcpd-bench/internal/bench"
	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
)

// Go benchmarks of the hot functions of the heartbeat path that have none in
// their own packages: token verification, the handler over the memstore
// without a network, and the server object's encoding. pkg/pgstore has
// BenchmarkSweep and BenchmarkHeartbeat; pkg/client a heartbeat over
// loopback HTTP.

var benchSecret = []byte("0123456789abcdef0123456789abcdef0123456789abcdef")

func benchToken(b *testing.B, tenant uuid.UUID) string {
	b.Helper()
	tok, err := auth.Issue(benchSecret, tenant, "bench", auth.ScopeRead+" "+auth.ScopeWrite, time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

func BenchmarkVerifyHS256(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int
	}{{"remembered", 0}, {"uncached", -1}} {
		b.Run(c.name, func(b *testing.B) {
			v, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: benchSecret, CacheSize: c.cache})
			if err != nil {
				b.Fatal(err)
			}
			tok := benchToken(b, bench.TenantID(1))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// handlerBundle is the API over a memstore holding one tenant's servers.
type handlerBundle struct {
	h     http.Handler
	token string
	ids   []uuid.UUID
}

func newHandler(b *testing.B, servers int) handlerBundle {
	b.Helper()
	return newTracedHandler(b, servers, nil)
}

// newTracedHandler is newHandler whose requests have spans of tp (nil:
// none).
func newTracedHandler(b *testing.B, servers int, tp trace.TracerProvider) handlerBundle {
	b.Helper()
	st := memstore.New(clockwork.NewRealClock())
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: st})
	v, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: benchSecret})
	if err != nil {
		b.Fatal(err)
	}
	tenant := bench.TenantID(1)
	hb := handlerBundle{h: api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: v, Tracer: tp}), token: benchToken(b, tenant)}
	for m := 1; m <= servers; m++ {
		req := bench.RegisterRequest(m)
		srv, _, err := reg.Register(context.Background(), tenant, registry.ServerInfo{
			ModuleName: req.ModuleName, Version: req.Version, SupportedProtocols: req.SupportedProtocols, Skills: req.Skills,
		})
		if err != nil {
			b.Fatal(err)
		}
		hb.ids = append(hb.ids, srv.ServerID)
	}
	return hb
}

func (hb handlerBundle) serve(b *testing.B, method, target string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+hb.token)
	if body != nil {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	w := httptest.NewRecorder()
	hb.h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("%s %s: %d %s", method, target, w.Code, w.Body.String())
	}
	return w
}

// BenchmarkHandlerHeartbeat is one heartbeat through the whole handler
// (token, body, registrar, memstore, JSON answer, metrics) with no network.
func BenchmarkHandlerHeartbeat(b *testing.B) {
	hb := newHandler(b, 100)
	bodies := make([][]byte, len(hb.ids))
	for i, id := range hb.ids {
		bodies[i] = fmt.Appendf(nil, `{"server_id":%q}`, id)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		hb.serve(b, http.MethodPost, "/v1/mcp/servers/heartbeat", bodies[i%len(bodies)])
		i++
	}
}

// BenchmarkHandlerHeartbeatTraced is BenchmarkHandlerHeartbeat with
// tracing on: every heartbeat sampled (its server span recorded and
// exported in batches to an exporter that drops them), or none of them.
func BenchmarkHandlerHeartbeatTraced(b *testing.B) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
		b.Run(c.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(c.sampler))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			hb := newTracedHandler(b, 100, tp)
			bodies := make([][]byte, len(hb.ids))
			for i, id := range hb.ids {
				bodies[i] = fmt.Appendf(nil, `{"server_id":%q}`, id)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				hb.serve(b, http.MethodPost, "/v1/mcp/servers/heartbeat", bodies[i%len(bodies)])
				i++
			}
		})
	}
}

// discardExporter takes spans and keeps none.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkHandlerListServers is a 100-server page through the handler.
func BenchmarkHandlerListServers(b *testing.B) {
	hb := newHandler(b, 100)
	b.ReportAllocs()
	for b.Loop() {
		hb.serve(b, http.MethodGet, "/v1/mcp/servers?limit=100", nil)
	}
}

// BenchmarkEncodeServer is the JSON encoding of one server object, as every
// heartbeat answers.
func BenchmarkEncodeServer(b *testing.B) {
	now := time.Now().UTC()
	srv := registry.Server{
		ServerID: bench.ServerID(1), TenantID: bench.TenantID(1), ModuleName: "module-1", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}, CapabilityAdvertisement: json.RawMessage(`{"tools":{"listChanged":true}}`),
		Status: registry.StatusHealthy, LastHeartbeatAt: now, RegisteredAt: now,
		TraceID: strings.Repeat("ab", 16), HeartbeatIntervalSecs: 10,
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(srv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeServerPage is what a client pays to read a 100-server
// page of GET /v1/mcp/servers.
func BenchmarkDecodeServerPage(b *testing.B) {
	hb := newHandler(b, 100)
	rec := hb.serve(b, http.MethodGet, "/v1/mcp/servers?limit=100", nil)
	body := rec.Body.Bytes()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var page api.ServerList
		if err := json.Unmarshal(body, &page); err != nil {
			b.Fatal(err)
		}
		if len(page.Servers) != 100 {
			b.Fatalf("%d servers decoded, want 100", len(page.Servers))
		}
	}
}
