package api_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/tracing"
)

// FuzzTraceparentReadings: every traceparent that the propagator takes,
// registry.TraceIDFromTraceparent reads to the same trace id. With
// tracing off the API reads a registration's trace id from the request's
// span (its traceparent, through the propagator) and else from the header
// through registry, which is what it read alone before its tracer was the
// no-op one; so the stored trace_id is the same either way.
func FuzzTraceparentReadings(f *testing.F) {
	for _, tp := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04",
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra-fields",
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
		" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
		"garbage", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		strings.Repeat("00-", 100),
	} {
		f.Add(tp)
	}
	f.Fuzz(func(t *testing.T, tp string) {
		ctx := tracing.Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
		id := tracing.TraceID(ctx)
		if id == "" {
			return
		}
		if got := registry.TraceIDFromTraceparent(tp); got != id {
			t.Fatalf("traceparent %q: the propagator reads trace id %q, registry %q", tp, id, got)
		}
	})
}
