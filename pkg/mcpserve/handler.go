package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/apiwire"
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
	// DefaultMaxSessionsPerSubject bounds the open 2025-11-25 sessions of
	// one token subject (sub) of a tenant in one mcpd, so that one token
	// cannot take the tenant's whole allowance.
	DefaultMaxSessionsPerSubject = 100
	// DefaultKeepAlive is the longest an open stream stays silent: past
	// it, an SSE comment keeps proxies from taking it for dead.
	DefaultKeepAlive = 15 * time.Second
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
	// MaxSessionsPerSubject bounds the open 2025-11-25 sessions of each
	// token subject of a tenant; zero: DefaultMaxSessionsPerSubject,
	// negative: only the tenant's bound.
	MaxSessionsPerSubject int
	// KeepAlive is the longest an open stream stays silent; zero:
	// DefaultKeepAlive.
	KeepAlive time.Duration
	// TokenClock tells when a token expires, which ends the streams it
	// opened; nil: the real clock.
	TokenClock clockwork.Clock
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

	// smu guards streams, the open streams that keepAlives tends.
	smu     sync.Mutex
	streams map[*streamWriter]struct{}
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
	if opts.MaxSessionsPerSubject == 0 {
		opts.MaxSessionsPerSubject = DefaultMaxSessionsPerSubject
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.TokenClock == nil {
		opts.TokenClock = clockwork.NewRealClock()
	}
	if opts.Streams == nil {
		opts.Streams = context.Background()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	h := &Handler{opts: opts, tenants: make(map[uuid.UUID]*tenant), streams: make(map[*streamWriter]struct{})}
	h.life, h.kill = context.WithCancel(context.WithoutCancel(opts.Streams))
	go h.keepAlives(h.life, opts.KeepAlive)
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

// ServeMCP serves one /mcp request of a caller with claims. A request
// that opens a stream (a 2025-11-25 GET, a 2026-07-28 subscriptions/listen)
// first takes one of the tenant's watch streams with acquireStream, which
// has answered when it reports false; the stream ends when the token that
// opened it expires.
func (h *Handler) ServeMCP(w http.ResponseWriter, r *http.Request, claims auth.Claims,
	acquireStream func() (release func(), ok bool)) {
	modern := r.Header.Get(headerProtocolVersion) >= statelessRevision
	stream := r.Method == http.MethodGet && !modern
	var msgs []rpcMessage
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			writeRPCError(w, http.StatusRequestEntityTooLarge, nil, "the request body is too large")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		msgs = parseMessages(body)
		if isBatch(body) {
			// No revision served here has batches (2025-06-18 dropped
			// them); one that does not parse is no JSON-RPC at all.
			code, msg := int64(jsonrpc.CodeInvalidRequest), "batches are not served: send one JSON-RPC message per request"
			if msgs == nil {
				code, msg = jsonrpc.CodeParseError, "the body is not a JSON-RPC 2.0 message (an object with "+
					"\"jsonrpc\": \"2.0\", a string \"method\" and a string or number \"id\")"
			}
			writeRPC(w, http.StatusBadRequest, nil, code, msg)
			return
		}
		if modern {
			stream = isListen(msgs)
		}
		if m, why := oversized(msgs); m != nil {
			writeRPC(w, rpcStatus(modern, m.isCall(), http.StatusBadRequest), m.ID, jsonrpc.CodeInvalidParams, why)
			return
		}
	}
	// After the body is read: a refusal answers the call's own id.
	t, err := h.acquire(r.Context(), claims.TenantID)
	if err != nil {
		if r.Context().Err() == nil {
			h.opts.Logger.ErrorContext(r.Context(), "mcp: start the tenant's server", "tenant_id",
				claims.TenantID.String(), "err", err)
		}
		writeRPCError(w, http.StatusServiceUnavailable, callID(msgs), "the registry is unavailable; try again")
		return
	}
	defer h.release(t)

	sw := &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: h.opts.StreamWriteTimeout,
		capture: r.Method == http.MethodPost}
	if !modern && r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
		// A request without a session opens one (initialize). The place
		// goes to the session before its client learns its id.
		reserved, refusal := t.reserveSession(subjectOf(r, claims), h.opts.MaxSessions, h.opts.MaxSessionsPerSubject)
		if reserved == nil {
			w.Header().Set("Retry-After", strconv.Itoa(int(sessionRetryAfter/time.Second)))
			writeRPC(w, http.StatusTooManyRequests, callID(msgs), codeServerError, refusal)
			return
		}
		// Its answer is held until it is whole: an initialize refused
		// opens no session, and names none.
		sw.holdOpen = true
		var once sync.Once
		commit := func() { once.Do(func() { reserved(w.Header().Get("Mcp-Session-Id")) }) }
		sw.onStart = commit
		defer commit()
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.opts.Streams, cancel)()
	if stream {
		release, ok := acquireStream()
		if !ok {
			return
		}
		defer release()
		// The stream ends with its token (the client reconnects with a
		// fresh one), and says it is alive while it has nothing to say.
		if !claims.ExpiresAt.IsZero() {
			timer := h.opts.TokenClock.AfterFunc(claims.ExpiresAt.Sub(h.opts.TokenClock.Now()), cancel)
			defer timer.Stop()
		}
		defer h.tend(sw)()
	}
	if modern {
		t.stateless.ServeHTTP(sw, r.WithContext(ctx))
	} else {
		t.stateful.ServeHTTP(sw, r.WithContext(ctx))
	}
	sw.finish(msgs, modern)
}

// rpcStatus is the HTTP status of a JSON-RPC error the endpoint answers
// itself: on 2026-07-28 the status SEP-2575 gives its code; before it,
// 200 for a call (the error is its answer, as a client reads any other)
// and the refusal's status otherwise.
func rpcStatus(modern, call bool, status int) int {
	if !modern && call {
		return http.StatusOK
	}
	return status
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
		subs: make(map[*mcp.ServerSession]map[string]struct{}), owners: make(map[string]string),
		openingBy: make(map[string]int),
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
			UnsubscribeHandler: t.unsubscribe,
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
// that stops reading is cut off. It sends a stream's keepalives between
// the SDK's events, rewrites the SDK's errors that name Go types, and
// holds back its text/plain refusals of a POST (capture) for finish.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	capture bool
	// onStart, if set, is called as the header is written.
	onStart func()

	mu sync.Mutex
	// started: the header is written; sse: as an event stream; last: when
	// the stream last carried anything; pinging: a keepalive is on its
	// way; closed: the handler returned.
	started, sse, pinging, closed bool
	last                          time.Time
	// held is a captured refusal: its status and body.
	held     int
	heldBody []byte
	// holdOpen: the answer to a request that opens a session is held in
	// opened (status openCode) until finish, which drops the session's id
	// if the answer is an error.
	holdOpen bool
	openCode int
	opened   []byte
}

func (s *streamWriter) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.held != 0 {
		return
	}
	if s.capture && code >= 400 && strings.HasPrefix(s.Header().Get("Content-Type"), "text/plain") {
		s.held = code
		return
	}
	if s.holdOpen {
		if s.openCode == 0 {
			s.openCode = code
		}
		return
	}
	s.startLocked(code)
}

func (s *streamWriter) startLocked(code int) {
	if s.onStart != nil {
		s.onStart()
	}
	s.started = true
	s.sse = strings.HasPrefix(s.Header().Get("Content-Type"), "text/event-stream")
	s.last = time.Now()
	// The body may be rewritten (plainErrors): its length is the writer's.
	s.Header().Del("Content-Length")
	s.ResponseWriter.WriteHeader(code)
}

func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != 0 {
		if len(s.heldBody) < 4096 {
			s.heldBody = append(s.heldBody, p[:min(len(p), 4096-len(s.heldBody))]...)
		}
		return len(p), nil
	}
	if s.holdOpen {
		if s.openCode == 0 {
			s.openCode = http.StatusOK
		}
		s.opened = append(s.opened, p...)
		return len(p), nil
	}
	if !s.started {
		s.startLocked(http.StatusOK)
	}
	n := len(p)
	if _, err := s.writeLocked(plainErrors(p)); err != nil {
		return 0, err
	}
	return n, nil
}

func (s *streamWriter) writeLocked(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	s.last = time.Now()
	return s.ResponseWriter.Write(p)
}

func (s *streamWriter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != 0 || s.holdOpen {
		return
	}
	if !s.started {
		s.startLocked(http.StatusOK)
	}
	_ = s.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// keepAlives sends an SSE comment on each open stream that has carried
// nothing for most of every, so that none is silent for longer: one
// goroutine for all streams, until ctx ends. A stream busy with a write
// is skipped (it is not silent); a due comment is written by a goroutine
// of its own, so that a client that does not read holds up no other.
func (h *Handler) keepAlives(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			h.smu.Lock()
			for s := range h.streams {
				if s.mu.TryLock() {
					due := s.started && s.sse && !s.pinging && now.Sub(s.last) >= every*3/4
					if due {
						s.pinging = true
					}
					s.mu.Unlock()
					if due {
						go s.ping()
					}
				}
			}
			h.smu.Unlock()
		}
	}
}

// tend counts s among the open streams that keepAlives tends, until
// the function it returns.
func (h *Handler) tend(s *streamWriter) (stop func()) {
	h.smu.Lock()
	h.streams[s] = struct{}{}
	h.smu.Unlock()
	return func() {
		h.smu.Lock()
		delete(h.streams, s)
		h.smu.Unlock()
		s.mu.Lock()
		s.closed = true // no ping after the handler returns
		s.mu.Unlock()
	}
}

// ping writes one keepalive comment.
func (s *streamWriter) ping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pinging = false
	if s.closed {
		return
	}
	if _, err := s.writeLocked([]byte(": keepalive\n\n")); err == nil {
		_ = s.rc.Flush()
	}
}

// finish answers a refusal that Write held back: as a JSON-RPC error when
// it is about the message (an unknown method, a body that is no JSON-RPC
// message), else as the SDK wrote it.
func (s *streamWriter) finish(msgs []rpcMessage, modern bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == 0 && s.holdOpen {
		s.holdOpen = false
		if s.openCode == 0 {
			return
		}
		if isErrorAnswer(s.opened) {
			s.Header().Del("Mcp-Session-Id")
		}
		s.startLocked(s.openCode)
		if len(s.opened) > 0 {
			_, _ = s.writeLocked(plainErrors(s.opened))
		}
		return
	}
	if s.held == 0 {
		return
	}
	var id json.RawMessage
	call := false
	if len(msgs) == 1 {
		id, call = msgs[0].ID, msgs[0].isCall()
	}
	if code, msg, ok := sdkPlainError(string(s.heldBody)); ok {
		if code == jsonrpc.CodeParseError {
			id, call = nil, false // no id can be read
		}
		status := s.held
		if code == jsonrpc.CodeMethodNotFound && modern {
			status = http.StatusNotFound // SEP-2575
		}
		writeRPC(s.ResponseWriter, rpcStatus(modern, call, status), id, code, msg)
		return
	}
	s.ResponseWriter.WriteHeader(s.held)
	_, _ = s.ResponseWriter.Write(s.heldBody)
}

// isErrorAnswer reports whether p (a JSON answer or one SSE event) is a
// JSON-RPC error.
func isErrorAnswer(p []byte) bool {
	data := p
	if i := bytes.Index(p, []byte("data: ")); i >= 0 && (i == 0 || p[i-1] == '\n') {
		data = p[i+len("data: "):]
		if end := bytes.IndexByte(data, '\n'); end >= 0 {
			data = data[:end]
		}
	}
	var m struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &m) == nil && len(m.Error) > 0 && string(m.Error) != "null"
}

// writeRPCError answers a request the endpoint refuses before MCP sees it,
// with the id of the call it refuses (nil: none known, JSON null).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, msg string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(apiwire.UnavailableRetryAfter()))
	}
	writeRPC(w, status, id, codeServerError, msg)
}

// codeServerError is the JSON-RPC error code of mcpd's own refusals (a
// session past its limit, the registry unavailable): the range -32000 to
// -32099 is the implementation's.
const codeServerError = -32000

// callID is the id of the request's message when it is one call (a
// request, not a notification or a response), else nil.
func callID(msgs []rpcMessage) json.RawMessage {
	if len(msgs) == 1 && msgs[0].isCall() {
		return msgs[0].ID
	}
	return nil
}
