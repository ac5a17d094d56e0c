package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/internal/logsample"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/limit"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/tracing"
)

// DefaultRequestTimeout bounds the work of one /v1 call or readiness probe.
const DefaultRequestTimeout = 5 * time.Second

// Pinger reports whether something this process needs to serve is ready:
// the store answers, takes writes and has the schema this build expects;
// /readyz asks it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// reader is what the handler reads from the store without the Registrar:
// skills and the audit trail, and the check of a cursor into the trail.
type reader interface {
	store.AuditReader
	store.AvailabilityReader
	Skills(ctx context.Context, tenant, serverID uuid.UUID) ([]registry.Skill, error)
	FindSkills(ctx context.Context, tenant uuid.UUID, f registry.SkillFilter) (registry.SkillPage, error)
}

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// Registrar serves every /v1 call that changes a server or reads one;
	// required. Skills and the audit trail are read from its store.
	Registrar *lifecycle.Registrar
	// Verifier checks bearer tokens; required.
	Verifier *auth.Verifier
	// Logger receives faults and, at debug level, one line per request.
	Logger *slog.Logger
	// Metrics is served on /metrics and observes every request; nil: a
	// fresh private registry.
	Metrics *Metrics
	// Pinger backs /readyz; nil: always ready. ReadyChecks combines several
	// (the store, the monitor).
	Pinger Pinger
	// RequestTimeout bounds each /v1 call and readiness probe; zero:
	// DefaultRequestTimeout. A watch stream is bounded by it until it
	// starts.
	RequestTimeout time.Duration
	// Feed serves GET /v1/mcp/watch; nil: the route answers 503.
	Feed *feed.Hub
	// CursorKey returns the secret that seals cursors (32 bytes, the
	// store's CursorKey), asked at the first call that needs it and until
	// it answers; nil: a random key, for cursors that need not outlive the
	// handler.
	CursorKey func(ctx context.Context) ([]byte, error)
	// Streams ends every watch stream when it is done (the server shuts
	// down); nil: streams end only with their request.
	Streams context.Context
	// StreamWriteTimeout bounds each write of a watch stream: a client that
	// reads nothing for that long is disconnected; zero:
	// DefaultStreamWriteTimeout.
	StreamWriteTimeout time.Duration
	// TokenClock tells when a token expires, which ends the watch stream
	// it opened, and times the thinning of repeated log records (one
	// "store unavailable" per route and 10 s); nil: the real clock.
	TokenClock clockwork.Clock
	// Catalog serves the MCP registry API (/v0.1); nil: those routes are
	// not served.
	Catalog store.CatalogReader
	// RegistryNamespace is the namespace of the MCP registry API's server
	// names; empty: DefaultRegistryNamespace.
	RegistryNamespace string
	// RegistryPublicTenant, when not uuid.Nil, is the tenant that a GET on
	// /v0.1 without an Authorization header reads, with the read scope and
	// that tenant's rate limit; uuid.Nil: such a GET is 401, as on /v1. A
	// request with a token always reads the token's tenant.
	RegistryPublicTenant uuid.UUID
	// Limits are the per-tenant request rate and watch streams; nil: none.
	// The request rate is checked for every /v1 call once its token is
	// verified.
	Limits *limit.Tenants
	// Tracer gives every request a server span, the child of its
	// traceparent; nil is OpenTelemetry's no-op provider: spans that record
	// nothing, at no measurable cost.
	Tracer trace.TracerProvider
	// MCP serves /mcp (mcpd as an MCP server) once the caller's token,
	// read scope and request rate are checked; nil: no /mcp route.
	MCP MCPServer
	// UI serves the web board under /ui/ (and /ui redirects there); nil:
	// no board, those paths are 404.
	UI http.Handler
	// UIRedirect answers GET /ui when UI is set.
	UIRedirect http.Handler
}

// MCPServer serves /mcp for a caller whose token is verified. A request
// that opens a stream calls acquireStream first: past the tenant's watch
// limit it has answered 429 and reports false; else the stream counts as
// one of the tenant's watch streams until release.
type MCPServer interface {
	ServeMCP(w http.ResponseWriter, r *http.Request, claims auth.Claims, acquireStream func() (release func(), ok bool))
}

type handler struct {
	reg     *lifecycle.Registrar
	store   reader // the Registrar's store, for what needs no Registrar
	verify  *auth.Verifier
	logger  *slog.Logger
	metrics *Metrics
	pinger  Pinger
	timeout time.Duration
	// cursors seals cursors once the key is read (codec).
	cursors   atomic.Pointer[cursorCodec]
	cursorKey func(ctx context.Context) ([]byte, error)
	feed      *feed.Hub
	streams   context.Context
	// streamWriteTimeout bounds each write of a watch stream.
	streamWriteTimeout time.Duration
	// tokenClock times the end of a watch stream at its token's exp, and
	// the thinning of repeated logs (logs).
	tokenClock clockwork.Clock
	// logs thins out the records that a lasting fault repeats on every
	// request (store unavailable).
	logs *logsample.Sampler
	// frames holds the encoded frames of recent events for watch streams.
	frames frameCache
	limits *limit.Tenants
	// catalog and namespace serve the MCP registry API (registry.go).
	catalog   store.CatalogReader
	namespace string
	// publicTenant answers /v0.1 reads without a token; uuid.Nil: none.
	publicTenant uuid.UUID
	// tracer starts the request spans; a no-op one when tracing is off.
	tracer trace.Tracer
}

// Route patterns, also the route label of mcpd_http_request_duration_seconds.
const (
	RouteRegister   = "POST /v1/mcp/servers/register"
	RouteHeartbeat  = "POST /v1/mcp/servers/heartbeat"
	RouteDeregister = "POST /v1/mcp/servers/deregister"
	RouteServers    = "GET /v1/mcp/servers"
	RouteServer     = "GET /v1/mcp/servers/{server_id}"
	RouteSkills     = "GET /v1/mcp/servers/{server_id}/skills"
	RouteAudit      = "GET /v1/mcp/audit"
	RouteWatch      = "GET /v1/mcp/watch"
	RouteFindSkills = "GET /v1/mcp/skills"
	RouteHealthz    = "GET /healthz"
	RouteReadyz     = "GET /readyz"
	RouteMetrics    = "GET /metrics"
	// RouteMCP is the MCP endpoint (Streamable HTTP: GET, POST, DELETE).
	RouteMCP    = "/mcp"
	RouteUI     = "GET /ui/"
	RouteUIRoot = "GET /ui"
	// routeUnmatched labels requests that matched no route (404, 405).
	routeUnmatched = "unmatched"
)

// NewHandler returns mcpd's HTTP API: every call of the contract, with
// authentication, input rules, problem answers, panic recovery and metrics.
func NewHandler(opts HandlerOptions) http.Handler {
	h := &handler{
		reg:       opts.Registrar,
		verify:    opts.Verifier,
		logger:    opts.Logger,
		metrics:   opts.Metrics,
		pinger:    opts.Pinger,
		timeout:   opts.RequestTimeout,
		cursorKey: opts.CursorKey,
		feed:      opts.Feed,
		streams:   opts.Streams,

		limits:       opts.Limits,
		catalog:      opts.Catalog,
		namespace:    opts.RegistryNamespace,
		publicTenant: opts.RegistryPublicTenant,
		tracer:       tracing.Tracer(opts.Tracer, tracerName),

		streamWriteTimeout: opts.StreamWriteTimeout,
		tokenClock:         opts.TokenClock,
	}
	if h.tokenClock == nil {
		h.tokenClock = clockwork.NewRealClock()
	}
	h.logs = logsample.NewRepeated(h.tokenClock.Now)
	if h.reg != nil {
		h.store = h.reg.Store()
	}
	if h.cursorKey == nil {
		h.cursorKey = func(context.Context) ([]byte, error) { return nil, nil }
	}
	if h.streamWriteTimeout <= 0 {
		h.streamWriteTimeout = DefaultStreamWriteTimeout
	}
	if h.streams == nil {
		h.streams = context.Background()
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.metrics == nil {
		h.metrics = NewMetrics(MetricsOptions{Logger: h.logger})
	}
	if h.timeout <= 0 {
		h.timeout = DefaultRequestTimeout
	}
	if h.namespace == "" {
		h.namespace = DefaultRegistryNamespace
	}

	mux := http.NewServeMux()
	mux.Handle(RouteRegister, h.authorized(auth.ScopeWrite, h.register))
	mux.Handle(RouteHeartbeat, h.authorized(auth.ScopeWrite, h.heartbeat))
	mux.Handle(RouteDeregister, h.authorized(auth.ScopeWrite, h.deregister))
	mux.Handle(RouteServers, h.authorized(auth.ScopeRead, h.listServers))
	mux.Handle(RouteServer, h.authorized(auth.ScopeRead, h.getServer))
	mux.Handle(RouteSkills, h.authorized(auth.ScopeRead, h.listSkills))
	mux.Handle(RouteAudit, h.authorized(auth.ScopeRead, h.listEvents))
	mux.Handle(RouteFindSkills, h.authorized(auth.ScopeRead, h.findSkills))
	mux.Handle(RouteServerAvailability, h.authorized(auth.ScopeRead, h.serverAvailability))
	mux.Handle(RouteSkillAvailability, h.authorized(auth.ScopeRead, h.skillAvailability))
	mux.Handle(RouteAvailability, h.authorized(auth.ScopeRead, h.availabilityRatios))
	mux.Handle(RouteWatch, h.authenticated(auth.ScopeRead, h.watch))
	if opts.MCP != nil {
		mux.Handle(RouteMCP, h.authenticated(auth.ScopeRead, func(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
			opts.MCP.ServeMCP(w, r, claims, func() (func(), bool) { return h.acquireWatch(w, r, claims.TenantID) })
		}))
	}
	// The three POST-only paths would otherwise be taken for a server_id
	// by GET: answer them as the wrong method they are.
	for _, verb := range []string{"register", "heartbeat", "deregister"} {
		mux.HandleFunc("GET /v1/mcp/servers/"+verb, postOnly)
	}
	if h.catalog != nil {
		mux.Handle(RouteRegistryServers, h.registryRead(h.registryList))
		mux.Handle(RouteRegistryVersions, h.registryRead(h.registryVersions))
		mux.Handle(RouteRegistryVersion, h.registryRead(h.registryVersion))
		mux.HandleFunc(RouteRegistryPreflight, registryPreflight)
		for _, route := range registryWriteRoutes {
			mux.HandleFunc(route, registryNotImplemented)
		}
	}
	mux.HandleFunc(RouteHealthz, h.healthz)
	mux.HandleFunc(RouteReadyz, h.readyz)
	mux.Handle(RouteMetrics, h.metrics.Handler())
	if opts.UI != nil {
		mux.Handle(RouteUI, opts.UI)
		if opts.UIRedirect != nil {
			mux.Handle(RouteUIRoot, opts.UIRedirect)
		}
	}
	return h.instrument(mux)
}

// codec returns the cursor codec, reading the key on first use: a store
// that is down at start makes the listings 503 until it answers.
func (h *handler) codec(ctx context.Context) (*cursorCodec, error) {
	if c := h.cursors.Load(); c != nil {
		return c, nil
	}
	key, err := h.cursorKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the cursor key: %w", err)
	}
	c, err := newCursorCodec(key)
	if err != nil {
		return nil, err
	}
	h.cursors.CompareAndSwap(nil, c)
	return h.cursors.Load(), nil
}

// postOnly answers a GET on a path that only takes POST.
func postOnly(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	writeProblem(w, r, methodNotAllowedProblem(r.Method))
}

func methodNotAllowedProblem(method string) *Problem {
	return newProblem(http.StatusMethodNotAllowed, ProblemMethodNotAllowed, "Method not allowed",
		"method "+method+" is not allowed on this path; see the Allow header")
}

func routeNotFoundProblem() *Problem {
	return newProblem(http.StatusNotFound, ProblemNotFound, "Not found", "no such route")
}

// authedFunc is a /v1 handler, called with the verified claims of the
// request's token.
type authedFunc func(w http.ResponseWriter, r *http.Request, claims auth.Claims)

// authorized checks the bearer token (401) and its scope (403), bounds the
// request's context by the request timeout, and calls next.
func (h *handler) authorized(scope string, next authedFunc) http.Handler {
	return h.authenticated(scope, func(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
		ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
		defer cancel()
		next(w, r.WithContext(ctx), claims)
	})
}

// authenticated checks the bearer token (401) and its scope (403) and
// calls next, with no bound on its time (streams bound their own).
func (h *handler) authenticated(scope string, next authedFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Two Authorization headers name two identities: a proxy in front
		// may have checked the other one. Neither is taken.
		token, ok := "", len(r.Header.Values("Authorization")) == 1
		if ok {
			token, ok = auth.BearerToken(r.Header.Get("Authorization"))
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcpd"`)
			writeProblem(w, r, newProblem(http.StatusUnauthorized, ProblemUnauthorized, "Unauthorized",
				"one Authorization: Bearer <token> header is required"))
			return
		}
		claims, err := h.verify.Verify(token)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcpd", error="invalid_token"`)
			writeProblem(w, r, newProblem(http.StatusUnauthorized, ProblemUnauthorized, "Unauthorized",
				"the bearer token is not valid: "+err.Error()))
			return
		}
		if ok, wait := h.limits.Allow(claims.TenantID); !ok {
			h.metrics.refused(RefusedRate)
			writeProblem(w, r, rateLimitedProblem(wait))
			return
		}
		allowed := claims.CanRead()
		if scope == auth.ScopeWrite {
			allowed = claims.CanWrite()
		}
		if !allowed {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcpd", error="insufficient_scope", scope="`+scope+`"`)
			writeProblem(w, r, newProblem(http.StatusForbidden, ProblemForbidden, "Forbidden",
				"the token lacks the scope "+scope))
			return
		}
		next(w, r, claims)
	})
}

// acquireWatch counts one more watch stream of tenant against its limit.
// Past the limit it answers 429 and returns ok false; otherwise the caller
// must call release when the stream ends.
func (h *handler) acquireWatch(w http.ResponseWriter, r *http.Request, tenant uuid.UUID) (release func(), ok bool) {
	release, ok = h.limits.AcquireWatch(tenant)
	if !ok {
		h.metrics.refused(RefusedWatches)
		writeProblem(w, r, tooManyWatchesProblem())
	}
	return release, ok
}

// writeJSON sends v as application/json with status.
func (h *handler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		h.logger.ErrorContext(r.Context(), "encode response", "path", r.URL.Path, "err", err)
		writeProblem(w, r, internalProblem())
		return
	}
	w.Header().Set("Content-Type", ContentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	h.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.pinger != nil {
		ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
		defer cancel()
		if err := h.pinger.Ping(ctx); err != nil {
			h.logger.WarnContext(r.Context(), "not ready", "err", err)
			writeProblem(w, r, unavailableProblem(notReadyDetail(err)))
			return
		}
	}
	h.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}
