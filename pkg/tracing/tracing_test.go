package tracing_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/tracing"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// TestEnabled: traces are on only with an OTLP endpoint, and off again
// when the SDK is disabled or the traces exporter is none.
func TestEnabled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "mcpd", "OTEL_TRACES_SAMPLER": "always_on"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "otlp"}, true},
	} {
		if got := tracing.Enabled(env(c.env)); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// TestOffCostsNothing: off, the provider's tracers (and those of a nil
// provider) make spans that record nothing and start no trace, and
// shutting down does nothing.
func TestOffCostsNothing(t *testing.T) {
	t.Parallel()
	p, err := tracing.New(context.Background(), env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() {
		t.Fatal("tracing is on without an endpoint")
	}
	for _, tracer := range []trace.Tracer{p.TracerProvider().Tracer("x"), tracing.Tracer(nil, "x")} {
		ctx, span := tracer.Start(context.Background(), "span")
		if span.IsRecording() || tracing.TraceID(ctx) != "" {
			t.Fatalf("an off tracer's span records (%v) or starts trace %q", span.IsRecording(), tracing.TraceID(ctx))
		}
		span.End()
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestTraceID: the trace id of a context's span, as the traceparent gave
// it; none without a valid one.
func TestTraceID(t *testing.T) {
	t.Parallel()
	ctx := tracing.Propagator.Extract(context.Background(), propagation.MapCarrier{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if got := tracing.TraceID(ctx); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("TraceID %q", got)
	}
	if got := tracing.TraceID(trace.ContextWithSpanContext(context.Background(), trace.SpanContext{})); got != "" {
		t.Fatalf("TraceID of no span %q", got)
	}
}
