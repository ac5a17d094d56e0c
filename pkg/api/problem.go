package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/registry"
)

// Problem types: the stable set of "type" URIs that mcpd answers with
// (pkg/apiwire documents each).
const (
	ProblemTypeBase             = apiwire.ProblemTypeBase
	ProblemValidation           = apiwire.ProblemValidation
	ProblemMalformed            = apiwire.ProblemMalformed
	ProblemUnauthorized         = apiwire.ProblemUnauthorized
	ProblemForbidden            = apiwire.ProblemForbidden
	ProblemNotFound             = apiwire.ProblemNotFound
	ProblemMethodNotAllowed     = apiwire.ProblemMethodNotAllowed
	ProblemDeregistered         = apiwire.ProblemDeregistered
	ProblemTooLarge             = apiwire.ProblemTooLarge
	ProblemUnsupportedMediaType = apiwire.ProblemUnsupportedMediaType
	ProblemInternal             = apiwire.ProblemInternal
	ProblemUnavailable          = apiwire.ProblemUnavailable
	ProblemQuotaExceeded        = apiwire.ProblemQuotaExceeded
	ProblemRateLimited          = apiwire.ProblemRateLimited
	ProblemCursorExpired        = apiwire.ProblemCursorExpired
)

// logStoreUnavailable is the message of a request refused 503 because the
// store could not answer.
const logStoreUnavailable = "store unavailable"

func newProblem(status int, typ, title, detail string) *Problem {
	return &Problem{Type: typ, Title: title, Status: status, Detail: detail}
}

func validationProblem(field, reason string) *Problem {
	p := newProblem(http.StatusBadRequest, ProblemValidation, "Invalid input", field+": "+reason)
	p.Field = field
	return p
}

func malformedProblem(detail string) *Problem {
	return newProblem(http.StatusBadRequest, ProblemMalformed, "Malformed body", detail)
}

func unavailableProblem(detail string) *Problem {
	return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Service unavailable", detail)
}

// writeProblem sends p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	h := w.Header()
	h.Set("Content-Type", ContentTypeProblem)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	switch {
	case p.RetryAfter > 0:
		h.Set("Retry-After", strconv.Itoa(retryAfterWhole(p.RetryAfter)))
	case p.Status == http.StatusServiceUnavailable:
		h.Set("Retry-After", strconv.Itoa(apiwire.UnavailableRetryAfter()))
	}
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"` + ProblemInternal + `","title":"Internal error","status":500,"detail":"encoding the problem failed"}`)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}

// isUnavailable reports whether err means the store cannot answer now.
func isUnavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	return errors.Is(err, registry.ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &connectErr)
}

// errorProblem maps an error of the registrar to the problem the client
// sees. Faults of mcpd are logged with their cause and never echoed.
func (h *handler) errorProblem(r *http.Request, err error) *Problem {
	var fe *registry.FieldError
	switch {
	case errors.As(err, &fe):
		return validationProblem(fe.Field, fe.Reason)
	case errors.Is(err, registry.ErrNotFound):
		return newProblem(http.StatusNotFound, ProblemNotFound, "Server not found",
			"no server with this server_id for the token's tenant")
	case errors.Is(err, registry.ErrPositionExpired):
		return newProblem(http.StatusGone, ProblemCursorExpired, "Cursor expired",
			"the position can no longer be resumed from; list again and watch from the list's watch_cursor")
	case errors.Is(err, registry.ErrDeregistered):
		return newProblem(http.StatusConflict, ProblemDeregistered, "Server deregistered",
			"the server is deregistered; register it again")
	case errors.Is(err, registry.ErrQuotaExceeded):
		h.metrics.refused(RefusedQuota)
		return newProblem(http.StatusForbidden, ProblemQuotaExceeded, "Server quota exceeded",
			"the tenant has as many servers that are not deregistered as it may; deregister one "+
				"or re-register an existing module")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away: nobody reads the answer.
		h.logger.DebugContext(r.Context(), "request canceled", "method", r.Method, "path", r.URL.Path)
		return unavailableProblem("the request was canceled")
	case isUnavailable(err):
		h.metrics.storeErrors.Inc()
		// Every request meets an outage: one record per route and
		// logsample.RepeatWindow, with how many were left out.
		h.logs.WarnAs(r.Context(), h.logger, logStoreUnavailable+" "+r.Pattern, logStoreUnavailable,
			"method", r.Method, "path", r.URL.Path, "err", err)
		return unavailableProblem("the store cannot answer now; retry later")
	default:
		h.metrics.storeErrors.Inc()
		h.logger.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		return internalProblem()
	}
}

// retryAfterWhole is d in whole seconds for Retry-After: rounded up, at
// least 1.
func retryAfterWhole(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// rateLimitedProblem is the 429 of a tenant past its request rate, to be
// retried after wait.
func rateLimitedProblem(wait time.Duration) *Problem {
	p := newProblem(http.StatusTooManyRequests, ProblemRateLimited, "Too many requests",
		"the tenant is past its request rate limit; retry after the Retry-After header")
	p.RetryAfter = wait
	return p
}

// tooManyWatchesProblem is the 429 of a tenant that has its most watch
// streams open.
func tooManyWatchesProblem() *Problem {
	p := newProblem(http.StatusTooManyRequests, ProblemRateLimited, "Too many watches",
		"the tenant has as many watch streams open as it may; close one or retry later")
	p.RetryAfter = time.Second
	return p
}

func internalProblem() *Problem {
	return newProblem(http.StatusInternalServerError, ProblemInternal, "Internal error",
		"mcpd could not complete the request; the cause is in its log")
}
