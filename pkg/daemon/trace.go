package daemon

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/tracing"
)

// monitorTracerName names the tracer of the sweep spans.
const monitorTracerName = "github.com/cyberos/mcpd/pkg/registry"

// sweepTracer returns the monitor's Trace hook: each sweep that changes
// something (or fails) is the root span of a trace of its own, "sweep",
// with the counts of its transitions by status reached; a sweep that
// changes nothing is no trace (tracing.Idle). With tracing off (tp the
// no-op provider) the span records nothing and the counts are not made.
func sweepTracer(tp trace.TracerProvider) func(context.Context) (context.Context, func([]registry.Event, error)) {
	tracer := tp.Tracer(monitorTracerName)
	return func(ctx context.Context) (context.Context, func([]registry.Event, error)) {
		// Droppable: a sweep that changes nothing (most of them, every
		// --monitor-period) is no trace at all, statements included.
		ctx, span := tracer.Start(ctx, "sweep", trace.WithNewRoot(),
			trace.WithAttributes(tracing.Droppable.Bool(true)))
		return ctx, func(transitions []registry.Event, err error) {
			if !span.IsRecording() {
				span.End()
				return
			}
			var degraded, unhealthy int
			for _, ev := range transitions {
				switch ev.ToStatus {
				case registry.StatusDegraded:
					degraded++
				case registry.StatusUnhealthy:
					unhealthy++
				}
			}
			span.SetAttributes(
				attribute.Int("mcpd.sweep.transitions", len(transitions)),
				attribute.Int("mcpd.sweep.degraded", degraded),
				attribute.Int("mcpd.sweep.unhealthy", unhealthy),
			)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "sweep failed")
			} else if len(transitions) == 0 {
				span.SetAttributes(tracing.Idle.Bool(true))
			}
			span.End()
		}
	}
}
