package tracing

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestIdleTracesDropped: a trace whose root starts Droppable and ends Idle
// is not passed on, its children neither; one that ends otherwise (not
// idle, or an error) is passed on whole, and so is every other trace.
func TestIdleTracesDropped(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newIdleFilter(rec)))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := tp.Tracer("test")
	run := func(name string, droppable bool, end func(trace.Span)) {
		var opts []trace.SpanStartOption
		if droppable {
			opts = append(opts, trace.WithAttributes(Droppable.Bool(true)))
		}
		ctx, root := tr.Start(context.Background(), name, opts...)
		_, child := tr.Start(ctx, name+"/statement")
		child.End()
		end(root)
		root.End()
	}
	run("idle sweep", true, func(s trace.Span) { s.SetAttributes(Idle.Bool(true)) })
	run("busy sweep", true, func(trace.Span) {})
	run("failed idle sweep", true, func(s trace.Span) { s.SetAttributes(Idle.Bool(true)); s.SetStatus(codes.Error, "x") })
	run("request", false, func(s trace.Span) { s.SetAttributes(Idle.Bool(true)) })
	var got []string
	for _, s := range rec.Ended() {
		got = append(got, s.Name())
	}
	want := []string{"busy sweep/statement", "busy sweep", "failed idle sweep/statement", "failed idle sweep",
		"request/statement", "request"}
	if !slices.Equal(got, want) {
		t.Fatalf("passed on %q, want %q", got, want)
	}
}
