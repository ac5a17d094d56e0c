package api

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/tracing"
)

// tracerName names the tracer of the HTTP API's spans.
const tracerName = "github.com/cyberos/mcpd/pkg/api"

// instrument wraps the router: it recovers panics into a 500 problem, turns
// the router's own 404 and 405 answers into problems, observes the request
// duration by route and code, logs the request at debug level and, with
// tracing on, gives it a server span, the child of its traceparent.
func (h *handler) instrument(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// No answer is to be read as anything but its Content-Type.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		var span trace.Span
		if !untraced(r.URL.Path) {
			r, span = h.startSpan(r)
		}
		sw := &statusWriter{ResponseWriter: w, req: r}
		if span != nil && span.IsRecording() {
			// Runs after the deferred recovery below: the status is known.
			defer func() { endSpan(span, r.Method, r.Pattern, sw.status) }()
		}
		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				h.logger.ErrorContext(r.Context(), "panic serving request", "method", r.Method, "path", r.URL.Path,
					"err", fmt.Errorf("panic: %v", v), "stack", string(debug.Stack()))
				if !sw.wroteHeader {
					writeProblem(sw, r, internalProblem())
				}
			}
			route := r.Pattern
			if route == "" {
				route = routeUnmatched
			}
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			elapsed := time.Since(start)
			h.metrics.requests.WithLabelValues(route, strconv.Itoa(code)).Observe(elapsed.Seconds())
			h.logger.DebugContext(r.Context(), "http request", "method", r.Method, "path", r.URL.Path,
				"route", route, "status", code, "duration_ms", float64(elapsed.Microseconds())/1000)
		}()
		if h.catalog != nil && isRegistryPath(r.URL.Path) {
			setRegistryCORS(sw.Header())
		}
		if name, detail := badQueryParameter(r.URL.RawQuery); name != "" {
			_, r.Pattern = mux.Handler(r)
			if strings.HasPrefix(r.URL.Path, "/v0.1/") {
				// The MCP registry API answers its own error shape.
				writeRegistryError(sw, &registryError{http.StatusBadRequest, name + ": " + detail})
				return
			}
			writeProblem(sw, r, validationProblem(name, detail))
			return
		}
		mux.ServeHTTP(sw, r)
	})
}

// badQueryParameter names the first query parameter that every endpoint
// refuses, and why; "" when the query is sound. A pair that does not parse
// (a bad percent-escape, a ';' separator) would be dropped by
// url.URL.Query, and its filter or limit silently ignored; a parameter
// given twice would have its first value taken and the next ignored. Both
// hide a caller's mistake.
func badQueryParameter(raw string) (name, detail string) {
	if raw == "" {
		return "", ""
	}
	for pair := range strings.SplitSeq(raw, "&") {
		key, value, _ := strings.Cut(pair, "=")
		_, kerr := url.QueryUnescape(key)
		_, verr := url.QueryUnescape(value)
		if kerr != nil || verr != nil || strings.Contains(pair, ";") {
			if !utf8.ValidString(key) {
				key = "" // a name that a problem cannot carry
			}
			// The name as the caller wrote it.
			return cmp.Or(key, "query"), "does not parse: percent-escape '%' and ';' in query values, and separate parameters with '&'"
		}
	}
	q, _ := url.ParseQuery(raw)
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if len(q[name]) > 1 {
			return name, "given more than once; give each query parameter once"
		}
	}
	return "", ""
}

// statusWriter records the status of a response. An answer of the router
// itself (no route matched: 404 or 405) is replaced by a problem.
type statusWriter struct {
	http.ResponseWriter
	req         *http.Request
	status      int
	wroteHeader bool
	discard     bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	w.status = code
	// The router sets the request's Pattern before it calls a handler; an
	// empty one means the router answers by itself.
	if w.req.Pattern == "" && (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) {
		w.discard = true
		p := routeNotFoundProblem()
		if code == http.StatusMethodNotAllowed {
			p = methodNotAllowedProblem(w.req.Method)
		}
		writeProblem(w.ResponseWriter, w.req, p)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.discard {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// untraced reports whether a request to path gets no span: the probes and
// the scrape (/healthz, /readyz, /metrics), every few seconds from every
// prober, would otherwise be most of the traces and say nothing. Their
// durations are in mcpd_http_request_duration_seconds.
func untraced(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return false
}

// startSpan starts the request's server span, the child of the span its
// traceparent names (or a new trace), and returns the request with it. A
// span with nothing to carry (tracing off and no traceparent) leaves the
// request as it came.
func (h *handler) startSpan(r *http.Request) (*http.Request, trace.Span) {
	ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := h.tracer.Start(ctx, r.Method, serverSpan...)
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
		)
	} else if !span.SpanContext().IsValid() {
		return r, span
	}
	return r.WithContext(ctx), span
}

// serverSpan are the options of a request's span, made once.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// endSpan names the request's span after its method and route ("POST
// /v1/mcp/servers/register", "POST /mcp" for a pattern without a method),
// records the answer's status and ends it.
func endSpan(span trace.Span, method, pattern string, code int) {
	if code == 0 {
		code = http.StatusOK
	}
	if pattern != "" {
		route := pattern
		if _, path, ok := strings.Cut(pattern, " "); ok {
			route = path
		}
		span.SetName(method + " " + route)
		span.SetAttributes(attribute.String("http.route", route))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
	span.End()
}

// recording returns the request's span when it is recorded, else nil: the
// attributes of a span are only made for one that keeps them (with tracing
// off, none is).
func (h *handler) recording(r *http.Request) trace.Span {
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		return span
	}
	return nil
}
