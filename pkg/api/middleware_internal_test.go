package api

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestEndSpanNames: a span is named after its method and route, whether
// the route's pattern names the method or not; an unmatched request keeps
// its method alone.
func TestEndSpanNames(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	for _, c := range []struct{ method, pattern, name, route string }{
		{"POST", RouteRegister, "POST /v1/mcp/servers/register", "/v1/mcp/servers/register"},
		{"POST", "/mcp", "POST /mcp", "/mcp"},
		{"GET", "", "GET", ""},
	} {
		_, span := tp.Tracer("t").Start(context.Background(), c.method)
		endSpan(span, c.method, c.pattern, 0)
		got := rec.Ended()[len(rec.Ended())-1]
		route := ""
		for _, kv := range got.Attributes() {
			if kv.Key == "http.route" {
				route = kv.Value.AsString()
			}
		}
		if got.Name() != c.name || route != c.route {
			t.Errorf("pattern %q: span %q route %q, want %q and %q", c.pattern, got.Name(), route, c.name, c.route)
		}
	}
}
