package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/feed"
)

// Defaults of Options.
const (
	// DefaultCoalesce is the least time between two notifications of one
	// resource to a subscriber.
	DefaultCoalesce = time.Second
	// DefaultSessionTimeout closes a 2025-11-25 session that made no
	// request for that long (an MCP ping is a request).
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultStreamWriteTimeout bounds each write to a client: one that does
	// not read for that long is disconnected.
	DefaultStreamWriteTimeout = 10 * time.Second
	// DefaultRequestTimeout bounds the reads of one call.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultMaxSessions bounds a tenant's open 2025-11-25 sessions in one
	// mcpd: each holds memory until it ends or idles out, and one token
	// could otherwise open them at its request rate for as long as the
	// session timeout.
	DefaultMaxSessions = 1000
	// sessionRetryAfter is the Retry-After of an initialize refused at
	// the cap: a session ends when its client closes it or idles out.
	sessionRetryAfter = 5 * time.Second
	// maxBodyBytes bounds a request body (the API's limit).
	maxBodyBytes = 256 << 10
)

// Revisions of MCP that the endpoint serves statelessly (2026-07-28 and
// later); older ones get a session.
const statelessRevision = "2026-07-28"

// headerProtocolVersion is the MCP-Protocol-Version header.
const headerProtocolVersion = "Mcp-Protocol-Version"

// Options configures New.
type Options struct {
	// Reader answers the tools and resources; required: the Registrar for
	// servers, the store for skills.
	Reader Reader
	// Feed drives notifications; required.
	Feed *feed.Hub
	// Version is mcpd's version, told to clients.
	Version string
	// Logger receives faults; nil: discarded.
	Logger *slog.Logger
	// Clock times the coalescing of notifications; nil: the real clock.
	Clock clockwork.Clock
	// Coalesce is the least time between two notifications of a resource;
	// zero: DefaultCoalesce.
	Coalesce time.Duration
	// SessionTimeout closes idle 2025-11-25 sessions; zero:
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// RequestTimeout bounds the reads of one call; zero:
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// StreamWriteTimeout bounds each write; zero: DefaultStreamWriteTimeout.
	StreamWriteTimeout time.Duration
	// MaxSessions bounds each tenant's open 2025-11-25 sessions; zero:
	// DefaultMaxSessions.
	MaxSessions int
	// Streams ends every open stream when it is done (shutdown); nil:
	// streams end with their request.
	Streams context.Context
}

// Handler serves /mcp for callers whose token is verified.
type Handler struct {
	opts Options

	mu      sync.Mutex
	tenants map[uuid.UUID]*tenant
	// life ends every follower when the handler closes.
	life context.Context
	kill context.CancelFunc
}

// New returns the /mcp handler of opts.
func New(opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = DefaultCoalesce
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Streams == nil {
		opts.Streams = context.Background()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	h := &Handler{opts: opts, tenants: make(map[uuid.UUID]*tenant)}
	h.life, h.kill = context.WithCancel(context.WithoutCancel(opts.Streams))
	context.AfterFunc(opts.Streams, h.Close)
	return h
}

// Close ends every tenant's follower and session.
func (h *Handler) Close() {
	h.kill()
	h.mu.Lock()
	ts := make([]*tenant, 0, len(h.tenants))
	for id, t := range h.tenants {
		ts = append(ts, t)
		delete(h.tenants, id)
	}
	h.mu.Unlock()
	for _, t := range ts {
		t.close()
		for s := range t.server.Sessions() {
			_ = s.Close()
		}
	}
}

// ServeMCP serves one /mcp request of a caller with claims. A request that
// opens a stream (a 2025-11-25 GET, a 2026-07-28 subscriptions/listen)
// first takes one of the tenant's watch streams with acquireStream, which
// has answered when it reports false.
func (h *Handler) ServeMCP(w http.ResponseWriter, r *http.Request, claims auth.Claims,
	acquireStream func() (release func(), ok bool)) {
	t, err := h.acquire(r.Context(), claims.TenantID)
	if err != nil {
		if r.Context().Err() == nil {
			h.opts.Logger.ErrorContext(r.Context(), "mcp: start the tenant's server", "tenant_id",
				claims.TenantID.String(), "err", err)
		}
		writeRPCError(w, http.StatusServiceUnavailable, "the registry is unavailable; try again")
		return
	}
	defer h.release(t)

	modern := r.Header.Get(headerProtocolVersion) >= statelessRevision
	stream := r.Method == http.MethodGet && !modern
	if r.Method == http.MethodPost && modern {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			writeRPCError(w, http.StatusRequestEntityTooLarge, "the request body is too large")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		stream = isListen(body)
	}
	if !modern && r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" &&
		t.sessions() >= h.opts.MaxSessions {
		// A request without a session opens one (initialize).
		w.Header().Set("Retry-After", strconv.Itoa(int(sessionRetryAfter/time.Second)))
		writeRPCError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"the tenant has %d MCP sessions open, as many as it may; close one, or use revision %s, which needs none",
			h.opts.MaxSessions, statelessRevision))
		return
	}
	if stream {
		release, ok := acquireStream()
		if !ok {
			return
		}
		defer release()
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.opts.Streams, cancel)()
	sw := &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: h.opts.StreamWriteTimeout}
	if modern {
		t.stateless.ServeHTTP(sw, r.WithContext(ctx))
		return
	}
	t.stateful.ServeHTTP(sw, r.WithContext(ctx))
}

// sessions counts the tenant's open 2025-11-25 sessions: those with an
// id. A stateless request's session has none, and lives as long as its
// request (a stream's is bounded by the watch-stream limit).
func (t *tenant) sessions() int {
	n := 0
	for s := range t.server.Sessions() {
		if s.ID() != "" {
			n++
		}
	}
	return n
}

// isListen reports whether a request body is a subscriptions/listen call.
func isListen(body []byte) bool {
	var m struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &m) == nil && m.Method == "subscriptions/listen"
}

// acquire returns tenant id's state, making it on first use, with one
// more request counted in flight.
func (h *Handler) acquire(ctx context.Context, id uuid.UUID) (*tenant, error) {
	h.mu.Lock()
	if t := h.tenants[id]; t != nil {
		t.inflight++
		h.mu.Unlock()
		return t, nil
	}
	h.mu.Unlock()

	t, err := h.newTenant(ctx, id)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if other := h.tenants[id]; other != nil {
		// Made at the same time by another request: keep one.
		t.close()
		other.inflight++
		return other, nil
	}
	if h.life.Err() != nil {
		t.close()
		return nil, errors.New("shutting down")
	}
	h.tenants[id] = t
	t.inflight++
	return t, nil
}

func (h *Handler) release(t *tenant) {
	h.mu.Lock()
	t.inflight--
	h.mu.Unlock()
}

// evict drops t when it serves nothing: no request in flight and no
// session; it reports whether it did.
func (h *Handler) evict(t *tenant) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.inflight > 0 || h.tenants[t.id] != t {
		return false
	}
	for range t.server.Sessions() {
		return false
	}
	delete(h.tenants, t.id)
	return true
}

// newTenant makes a tenant's MCP server and starts following its feed.
func (h *Handler) newTenant(ctx context.Context, id uuid.UUID) (*tenant, error) {
	from, err := h.opts.Feed.Horizon(ctx, id)
	if err != nil {
		return nil, err
	}
	t := &tenant{
		id: id, reader: h.opts.Reader, logger: h.opts.Logger, clock: h.opts.Clock, every: h.opts.Coalesce,
		timeout: h.opts.RequestTimeout,
		modules: make(map[string][]string), names: make(map[string]int),
		last: make(map[string]time.Time), pending: make(map[string]bool),
	}
	t.server = mcp.NewServer(&mcp.Implementation{Name: "mcpd", Title: "mcpd registry", Version: h.opts.Version},
		&mcp.ServerOptions{
			Instructions: "mcpd knows which MCP servers are alive. find_skill names the live providers of a skill; " +
				"subscribe to mcpd://skills/{name} to be told when they change.",
			Logger: sdkLogger(h.opts.Logger),
			Capabilities: &mcp.ServerCapabilities{
				Tools:     &mcp.ToolCapabilities{},
				Resources: &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
			},
			SubscribeHandler:   t.checkSubscription,
			UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
			SetCacheable:       setCacheable,
		})
	t.addTools(t.server)
	t.addResources(t.server)
	if err := t.load(ctx); err != nil {
		return nil, err
	}
	getServer := func(*http.Request) *mcp.Server { return t.server }
	// DNS-rebinding protection is for servers without authentication;
	// every request here carries a bearer token, and mcpd behind a proxy on
	// the same host sees loopback connections with the public Host.
	t.stateful = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		SessionTimeout: h.opts.SessionTimeout, Logger: sdkLogger(h.opts.Logger), MaxRequestBodyBytes: maxBodyBytes,
		DisableLocalhostProtection: true,
	})
	t.stateless = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true, Logger: sdkLogger(h.opts.Logger), MaxRequestBodyBytes: maxBodyBytes,
		DisableLocalhostProtection: true,
	})
	fctx, stop := context.WithCancel(h.life)
	t.stop = stop
	go t.follow(fctx, h.opts.Feed, from, func() bool { return h.evict(t) })
	return t, nil
}

// checkSubscription accepts subscriptions to mcpd's two kinds of resource.
func (t *tenant) checkSubscription(_ context.Context, req *mcp.SubscribeRequest) error {
	u := req.Params.URI
	if strings.HasPrefix(u, SkillURIPrefix) && len(u) > len(SkillURIPrefix) ||
		strings.HasPrefix(u, ServerURIPrefix) && len(u) > len(ServerURIPrefix) {
		t.subscribed.Add(1)
		return nil
	}
	return mcp.ResourceNotFoundError(u)
}

// counts returns how many subscriptions tenant id accepted and how many of
// its events were followed, for tests.
func (h *Handler) counts(id uuid.UUID) (subscribed, followed int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.tenants[id]; t != nil {
		return t.subscribed.Load(), t.followed.Load()
	}
	return 0, 0
}

// Cache hints of 2026-07-28: every answer is the tenant's own (private);
// the tool and template lists and the server's description do not change
// while mcpd runs; resources are live (subscribe to follow them).
func setCacheable(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	c.CacheScope = "private"
	switch req.(type) {
	case *mcp.ListToolsRequest, *mcp.ListResourceTemplatesRequest, *mcp.ServerRequest[*mcp.DiscoverParams]:
		c.TTLMs = int(time.Hour / time.Millisecond)
	default:
		c.TTLMs = 0
	}
}

// sdkLogger is the SDK's logger: errors only. It logs every subscription
// at info, and at warning every notification that a client's session
// could not take (a session that subscribed and never opened its stream):
// one line per session and change, which any caller with a read token
// could multiply at will.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelError})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

// streamWriter bounds each write to a client by the stream write timeout,
// so that a long stream outlives the server's write timeout while a client
// that stops reading is cut off.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *streamWriter) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	return s.ResponseWriter.Write(p)
}

func (s *streamWriter) Flush() { _ = s.rc.Flush() }

// Unwrap lets http.ResponseController reach the connection.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// writeRPCError answers a request the endpoint refuses before MCP sees it.
func writeRPCError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32000, "message": msg}})
	_, _ = w.Write(b)
}
