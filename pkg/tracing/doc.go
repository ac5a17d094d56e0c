// Package tracing sets up mcpd's OpenTelemetry traces from the standard
// OTEL_* environment variables: an OTLP/HTTP exporter behind a batching
// processor when an endpoint is named, and nothing at all otherwise. It
// also holds the W3C Trace Context propagator and the trace id helper of
// the HTTP API.
package tracing
