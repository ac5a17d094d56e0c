package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/cyberos/mcpd/pkg/version"
)

// DefaultServiceName is the service.name of mcpd's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const DefaultServiceName = "mcpd"

// Environment variables that decide whether traces are on.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
)

// Propagator reads and writes the traceparent header (W3C Trace Context),
// the one propagation format of the contract.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Provider is mcpd's source of tracers: the OpenTelemetry SDK exporting
// over OTLP/HTTP in batches when tracing is on, nothing when it is off.
type Provider struct {
	sdk *sdktrace.TracerProvider // nil: off
}

// Enabled reports whether the environment turns traces on: an OTLP
// endpoint is named (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), the SDK is not disabled
// (OTEL_SDK_DISABLED=true) and the traces exporter is not "none".
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv(EnvTracesExporter)), "none") {
		return false
	}
	return strings.TrimSpace(getenv(EnvEndpoint)) != "" || strings.TrimSpace(getenv(EnvTracesEndpoint)) != ""
}

// New returns the Provider the environment asks for. Off (Enabled is
// false), it is a Provider whose TracerProvider is OpenTelemetry's no-op
// one: its spans record nothing, and the callers skip their attribute work
// for a span that is not recording. On, the exporter, the sampler (OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG; default parent-based, always on), the batch
// processor (OTEL_BSP_*) and the resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES) are read by the SDK from the process
// environment, as its documentation describes. A trace whose root span
// starts Droppable and ends Idle is not exported at all.
//
// The SDK reports what it cannot export through OpenTelemetry's one
// process-wide error handler; New points it at logger (warn level), so the
// last daemon started in a process gets those lines.
func New(ctx context.Context, getenv func(string) string, logger *slog.Logger) (*Provider, error) {
	if !Enabled(getenv) {
		return &Provider{}, nil
	}
	if logger != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("traces not exported", "err", err)
		}))
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", DefaultServiceName),
			attribute.String("service.version", version.Version),
		),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // last: the environment's service.name wins
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(newIdleFilter(sdktrace.NewBatchSpanProcessor(exp))),
		sdktrace.WithResource(res))
	return &Provider{sdk: sdk}, nil
}

// Enabled reports whether p records and exports spans.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// TracerProvider returns the provider to take tracers from: the SDK's when
// tracing is on, OpenTelemetry's no-op one when it is off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if !p.Enabled() {
		return noop.NewTracerProvider()
	}
	return p.sdk
}

// Shutdown exports the spans still queued and stops the exporter, bounded
// by ctx; off, it does nothing.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// Tracer returns the named tracer of tp; a nil tp (an Options field left
// unset) is OpenTelemetry's no-op provider.
func Tracer(tp trace.TracerProvider, name string) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(name)
}

// TraceID returns the trace id of the span in ctx as 32 lowercase hex
// digits, or "" when ctx carries no valid span context.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.TraceID().IsValid() {
		return ""
	}
	return sc.TraceID().String()
}
