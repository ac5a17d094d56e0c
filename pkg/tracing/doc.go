// Package tracing sets up mcpd's OpenTelemetry traces from the standard
// OTEL_* environment variables: an OTLP/HTTP exporter behind a batching
// processor when an endpoint is named, and nothing at all otherwise. It
// also carries the W3C Trace Context helpers that the HTTP API, the alert
// webhooks and the store share.
package tracing
