// Package otlptest is an OTLP/HTTP trace receiver for tests and the
// benchmark: it decodes what an exporter posts to /v1/traces and keeps the
// spans, so that a test can read the span tree a process sent.
package otlptest
