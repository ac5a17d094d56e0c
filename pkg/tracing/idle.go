package tracing

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Attributes by which a root span asks for its whole trace to be dropped
// when it turns out to have done nothing: Droppable at its start (so that
// its children are held back until it ends), Idle at its end. A monitor
// sweep that changes nothing, every few seconds, is such a trace.
var (
	Droppable = attribute.Key("mcpd.trace.droppable")
	Idle      = attribute.Key("mcpd.trace.idle")
)

// maxHeldSpans bounds the spans held for one droppable trace: past it, the
// trace is exported whatever its root says.
const maxHeldSpans = 1024

// idleFilter is a span processor in front of next: the spans of a trace
// whose root started Droppable are held until the root ends, then dropped
// with it when it ends Idle (and not an error), else passed on in the order
// they ended. Spans of other traces pass straight through.
type idleFilter struct {
	next sdktrace.SpanProcessor

	mu   sync.Mutex
	held map[trace.TraceID][]sdktrace.ReadOnlySpan // nil slice: held, none yet
}

func newIdleFilter(next sdktrace.SpanProcessor) *idleFilter {
	return &idleFilter{next: next, held: map[trace.TraceID][]sdktrace.ReadOnlySpan{}}
}

func (f *idleFilter) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	if !s.Parent().IsValid() && hasTrue(s.Attributes(), Droppable) {
		f.mu.Lock()
		f.held[s.SpanContext().TraceID()] = nil
		f.mu.Unlock()
	}
	f.next.OnStart(ctx, s)
}

func (f *idleFilter) OnEnd(s sdktrace.ReadOnlySpan) {
	id := s.SpanContext().TraceID()
	f.mu.Lock()
	spans, ok := f.held[id]
	if !ok {
		f.mu.Unlock()
		f.next.OnEnd(s)
		return
	}
	root := !s.Parent().IsValid()
	if !root && len(spans) < maxHeldSpans {
		f.held[id] = append(spans, s)
		f.mu.Unlock()
		return
	}
	// The root, or a span past the bound: what is held goes on now (past
	// the bound, the rest of the trace passes straight through).
	delete(f.held, id)
	f.mu.Unlock()
	if root && hasTrue(s.Attributes(), Idle) && s.Status().Code != codes.Error {
		return
	}
	for _, held := range spans {
		f.next.OnEnd(held)
	}
	f.next.OnEnd(s)
}

func (f *idleFilter) Shutdown(ctx context.Context) error   { return f.next.Shutdown(ctx) }
func (f *idleFilter) ForceFlush(ctx context.Context) error { return f.next.ForceFlush(ctx) }

func hasTrue(attrs []attribute.KeyValue, key attribute.Key) bool {
	for _, kv := range attrs {
		if kv.Key == key && kv.Value.Type() == attribute.BOOL && kv.Value.AsBool() {
			return true
		}
	}
	return false
}
