package agent

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/backoff"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/mcpinspect"
	"github.com/cyberos/mcpd/pkg/registry"
)

// Defaults of Options.
const (
	DefaultProbeTimeout      = 2 * time.Second
	DefaultConnectTimeout    = 30 * time.Second
	DefaultCallTimeout       = 5 * time.Second
	DefaultDeregisterTimeout = 5 * time.Second
	DefaultJitter            = 0.1
	DefaultRetryMin          = 500 * time.Millisecond
	DefaultRetryMax          = 30 * time.Second
	DefaultRestartMin        = time.Second
	DefaultRestartMax        = 30 * time.Second
	DefaultChangeDebounce    = 250 * time.Millisecond
)

// Registry is what the agent calls of mcpd; *client.Client is one.
type Registry interface {
	Register(ctx context.Context, req apiwire.RegisterRequest, traceparent string) (registry.Server, bool, error)
	Heartbeat(ctx context.Context, serverID uuid.UUID) (registry.Server, error)
	Deregister(ctx context.Context, serverID uuid.UUID) (registry.Server, error)
}

// Options configure an Agent. Module, Target and Registry are required;
// zero durations take the defaults above. Jitter is at most 0.5.
type Options struct {
	// Module is the module name the server is registered under.
	Module string
	// Version, when set, is registered instead of serverInfo.version.
	Version string
	// Target is the MCP server to watch.
	Target mcpinspect.Target
	// Registry is mcpd.
	Registry Registry
	// Traceparent is sent with each registration (W3C Trace Context). The
	// liveness probes of the MCP server carry a traceparent of the server's
	// trace (its trace_id at mcpd, this one's before the first answer),
	// each with a span id of its own.
	Traceparent string
	// ProbeRevisions asks a server without server/discover about each other
	// revision once (see mcpinspect.ProbeRevisions).
	ProbeRevisions bool
	// MCPHeader is sent with every HTTP request to the MCP server (an
	// Authorization header, say). Over HTTP, a server that answers 401 or
	// 403 counts as alive: it is up, refusing the credentials.
	MCPHeader http.Header

	Logger *slog.Logger
	// Clock times every wait; nil: the real clock.
	Clock clockwork.Clock
	// Rand draws the jitter; nil: the global source.
	Rand *rand.Rand

	// ProbeTimeout bounds one liveness probe.
	ProbeTimeout time.Duration
	// ConnectTimeout bounds connecting (starting a stdio server included)
	// and describing the server.
	ConnectTimeout time.Duration
	// CallTimeout bounds one call to mcpd.
	CallTimeout time.Duration
	// DeregisterTimeout bounds the deregistration at the end.
	DeregisterTimeout time.Duration
	// TerminateGrace: see mcpinspect.Options.
	TerminateGrace time.Duration
	// Jitter spreads each wait by up to this share either way (0.1: ±10%);
	// negative: none.
	Jitter float64
	// RetryMin and RetryMax bound the backoff of calls to mcpd that failed.
	RetryMin, RetryMax time.Duration
	// RestartMin and RestartMax bound the backoff of reconnecting (over
	// stdio: restarting the command).
	RestartMin, RestartMax time.Duration
	// ChangeDebounce gathers notifications/tools/list_changed that come
	// close together into one re-registration.
	ChangeDebounce time.Duration
	// Interval is the heartbeat interval until mcpd says one (its answers'
	// heartbeat_interval_seconds); zero: registry.DefaultHeartbeatInterval.
	Interval time.Duration
}

// errNoRegistry: Options.Registry is nil.
var errNoRegistry = errors.New("agent: no registry")

// Agent keeps one MCP server registered while it answers. Run it once.
type Agent struct {
	opts  Options
	log   *slog.Logger
	clock clockwork.Clock

	changed chan struct{}
	closing sync.WaitGroup // sessions being closed

	sess        *mcpinspect.Session
	connectedAt time.Time
	restarts    int       // consecutive failed or short-lived connections
	reconnectAt time.Time // no connection attempt before this

	server     *registry.Server         // mcpd's last answer about the server
	registered *apiwire.RegisterRequest // what was registered last
	interval   time.Duration
	dirty      bool  // describe the server before the next heartbeat
	reregister bool  // register instead of heartbeating
	callFails  int   // consecutive failed calls to mcpd
	callErr    error // the last failed call's error, for its Retry-After
	probeFails int   // consecutive failed probes

	revisions map[string]mcpinspect.Report // probed revisions per server name, version and revision

	mcpTr     *mcpinspect.HeaderTransport // over HTTP: the MCP server's transport
	closeIdle func()                      // closes its idle connections at the end
	refused   bool                        // the server refuses the credentials (401/403) at the moment

	// waiting, set by tests before Run, gets the length of each wait on
	// the clock as the wait begins: a test on a fake clock advances it
	// then, and never sleeps.
	waiting chan<- time.Duration
}

// New returns an agent, checking the options.
func New(opts Options) (*Agent, error) {
	if !registry.ValidModuleName(opts.Module) {
		return nil, fmt.Errorf("agent: module name %q: want 1-63 of [a-z0-9-], starting with a letter", opts.Module)
	}
	if opts.Version != "" && !registry.ValidVersion(opts.Version) {
		return nil, fmt.Errorf("agent: version %q is not a semantic version", opts.Version)
	}
	if err := opts.Target.Validate(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if opts.Registry == nil {
		return nil, errNoRegistry
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.ProbeTimeout, DefaultProbeTimeout)
	def(&opts.ConnectTimeout, DefaultConnectTimeout)
	def(&opts.CallTimeout, DefaultCallTimeout)
	def(&opts.DeregisterTimeout, DefaultDeregisterTimeout)
	def(&opts.RetryMin, DefaultRetryMin)
	def(&opts.RetryMax, DefaultRetryMax)
	def(&opts.RestartMin, DefaultRestartMin)
	def(&opts.RestartMax, DefaultRestartMax)
	def(&opts.ChangeDebounce, DefaultChangeDebounce)
	def(&opts.Interval, registry.DefaultHeartbeatInterval)
	if opts.Jitter == 0 {
		opts.Jitter = DefaultJitter
	}
	opts.Jitter = max(0, min(opts.Jitter, 0.5))
	a := &Agent{opts: opts, log: opts.Logger, clock: opts.Clock, changed: make(chan struct{}, 1),
		interval: opts.Interval, revisions: map[string]mcpinspect.Report{}, closeIdle: func() {}}
	if !a.opts.Target.Stdio() {
		a.mcpTr, a.closeIdle = mcpinspect.WithHeader(&a.opts.Target, opts.MCPHeader)
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.clock == nil {
		a.clock = clockwork.NewRealClock()
	}
	a.log = a.log.With("module", opts.Module)
	return a, nil
}

// PermanentError is a failure that retrying will not mend: the server's
// version is not semantic, or mcpd refused the first registration (bad
// input, token, scope). Run returns it before the first registration only.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Run registers the server and keeps it registered until ctx ends, then
// deregisters it and returns nil. It returns early only with a
// *PermanentError, before the server was first registered; every later
// failure is logged and retried.
func (a *Agent) Run(ctx context.Context) error {
	defer a.closeIdle()
	defer a.closing.Wait()
	defer a.dropSession()
	a.log.Info("agent starting", "mcp", a.opts.Target.String())
	if err := a.start(ctx); err != nil {
		if ctx.Err() != nil {
			a.log.Info("agent stopped before the server was registered")
			return nil
		}
		return err
	}
	next := a.heartbeatDelay()
	timer := a.clock.NewTimer(next)
	defer timer.Stop()
	reset := func(d time.Duration) {
		timer.Stop()
		timer.Reset(d)
		next = d
	}
	for {
		var done <-chan struct{}
		if a.sess != nil {
			done = a.sess.Done()
		}
		a.signalWait(next)
		select {
		case <-ctx.Done():
			a.shutdown(ctx)
			return nil
		case <-done:
			a.sessionEnded()
			reset(a.untilReconnect())
		case <-a.changed:
			a.log.Info("the server's tool list changed")
			a.dirty = true
			reset(a.opts.ChangeDebounce)
		case <-timer.Chan():
			reset(a.tick(ctx))
		}
	}
}

// start connects, describes and registers, retrying what can be retried.
func (a *Agent) start(ctx context.Context) error {
	for {
		if a.sess == nil {
			if wait := a.untilReconnect(); wait > 0 {
				if err := a.sleep(ctx, wait); err != nil {
					return err
				}
			}
			if err := a.connect(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				continue
			}
		}
		reg, err := a.describe(ctx)
		var ve *mcpinspect.VersionError
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &ve):
			return &PermanentError{Err: err}
		case err != nil:
			a.log.Warn("describe the MCP server", "err", err)
			a.dropSession()
			a.scheduleReconnect()
			continue
		}
		err = a.register(ctx, reg)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case classify(err) == outcomeRejected:
			// The first registration refused ends the agent: no retry
			// to announce.
			a.log.Error("register refused", "err", err)
			return &PermanentError{Err: fmt.Errorf("register %s: %w", a.opts.Module, err)}
		}
		a.callFailed("register", err)
		if err := a.sleep(ctx, a.retryDelay()); err != nil {
			return err
		}
	}
}

// tick probes the server and, when it answers, sends the heartbeat (or the
// registration that is due); it returns the time until the next tick.
func (a *Agent) tick(ctx context.Context) time.Duration {
	if a.sess == nil {
		if wait := a.untilReconnect(); wait > 0 {
			return wait
		}
		denied := a.deniedCount()
		if err := a.connect(ctx); err != nil {
			if a.registered == nil || a.deniedCount() == denied || ctx.Err() != nil {
				return a.untilReconnect()
			}
			// Up, refusing the credentials: alive. Connect again at the
			// next tick, without a backoff.
			a.reconnectAt, a.restarts = a.clock.Now(), 0
			a.refusedNow()
			return a.alive(ctx)
		}
	}
	if err := a.probe(ctx); err != nil {
		if ctx.Err() != nil {
			return a.heartbeatDelay()
		}
		a.probeFails++
		a.log.Warn("liveness probe failed: no heartbeat", "err", err, "failures", a.probeFails)
		if a.reconnectAfter(err) {
			a.dropSession()
		}
		return a.heartbeatDelay()
	}
	if a.probeFails > 0 {
		a.log.Info("the MCP server answers again", "failures", a.probeFails)
		a.probeFails = 0
	}
	if a.refused {
		return a.alive(ctx)
	}
	if a.dirty {
		reg, err := a.describe(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return a.heartbeatDelay()
			}
			a.log.Error("describe the MCP server: no heartbeat", "err", err)
			return a.heartbeatDelay()
		}
		a.dirty = false
		if a.reregister || a.registered == nil || !reflect.DeepEqual(reg.Request, *a.registered) {
			return a.registerDelay(ctx, reg)
		}
	}
	return a.alive(ctx)
}

// alive sends the heartbeat, or the registration that is due, of a server
// that answered; it returns the time until the next tick.
func (a *Agent) alive(ctx context.Context) time.Duration {
	if a.probeFails > 0 {
		a.log.Info("the MCP server answers again", "failures", a.probeFails)
		a.probeFails = 0
	}
	if a.reregister || a.server == nil {
		return a.registerDelay(ctx, mcpinspect.Registration{Request: *a.registered})
	}
	return a.beat(ctx)
}

// refusedNow notes that the MCP server answered 401 or 403, logging the
// start of such a stretch.
func (a *Agent) refusedNow() {
	if !a.refused {
		a.log.Warn("the MCP server refuses the agent's credentials (401/403): it is up, so heartbeats go on; check --mcp-header")
	}
	a.refused = true
}

// httpReconnectFailures is how many probes in a row may fail over HTTP,
// each answered with an error or timed out, before the agent starts a new
// connection anyway.
const httpReconnectFailures = 3

// reconnectAfter says whether a failed probe calls for a new connection:
// over HTTP when the connection itself failed (refused, reset, session
// unknown to a restarted server), or after several failures of any kind;
// over stdio never (the process may only be busy; its exit is seen on its
// own).
func (a *Agent) reconnectAfter(err error) bool {
	if a.opts.Target.Stdio() {
		return false
	}
	return !answered(err) || a.probeFails >= httpReconnectFailures
}

// codeRejectedByTransport is the SDK's JSON-RPC code for a request that never
// reached the server (refused, reset, session unknown).
const codeRejectedByTransport = -32005

// answered reports whether a failed probe reached the server: it answered
// with an error, or did not answer in time.
func answered(err error) bool {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr.Code != codeRejectedByTransport
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// beat sends one heartbeat and returns the time until the next tick.
func (a *Agent) beat(ctx context.Context) time.Duration {
	cctx, cancel := context.WithTimeout(ctx, a.opts.CallTimeout)
	srv, err := a.opts.Registry.Heartbeat(cctx, a.server.ServerID)
	cancel()
	switch classify(err) {
	case outcomeOK:
		a.callOK(srv)
		a.log.Debug("heartbeat", "server_id", srv.ServerID, "status", srv.Status)
		return a.heartbeatDelay()
	case outcomeNotFound:
		a.log.Warn("mcpd does not know the server: registering again", "server_id", a.server.ServerID)
		return a.registerDelay(ctx, mcpinspect.Registration{Request: *a.registered})
	case outcomeDeregistered:
		a.log.Warn("the server was deregistered: registering again", "server_id", a.server.ServerID)
		return a.registerDelay(ctx, mcpinspect.Registration{Request: *a.registered})
	}
	if ctx.Err() != nil {
		return a.heartbeatDelay()
	}
	a.callFailed("heartbeat", err)
	return min(a.retryDelay(), a.heartbeatDelay())
}

// registerDelay registers and returns the time until the next tick.
func (a *Agent) registerDelay(ctx context.Context, reg mcpinspect.Registration) time.Duration {
	if err := a.register(ctx, reg); err != nil {
		if ctx.Err() != nil {
			return a.heartbeatDelay()
		}
		a.callFailed("register", err)
		return min(a.retryDelay(), a.heartbeatDelay())
	}
	return a.heartbeatDelay()
}

// register sends the registration; until it succeeds every tick registers.
// Its callers log a failure: the first registration refused ends the agent.
func (a *Agent) register(ctx context.Context, reg mcpinspect.Registration) error {
	a.reregister = true
	for _, w := range reg.Warnings {
		a.log.Warn(w)
	}
	cctx, cancel := context.WithTimeout(ctx, a.opts.CallTimeout)
	srv, created, err := a.opts.Registry.Register(cctx, reg.Request, a.opts.Traceparent)
	cancel()
	if err != nil {
		return err
	}
	req := reg.Request
	a.registered, a.reregister = &req, false
	a.callOK(srv)
	a.log.Info("registered", "server_id", srv.ServerID, "new", created, "version", req.Version,
		"protocols", req.SupportedProtocols, "skills", len(req.Skills), "status", srv.Status,
		"heartbeat_interval", a.interval)
	return nil
}

func (a *Agent) callOK(srv registry.Server) {
	if a.callFails > 0 {
		a.log.Info("mcpd answers again", "failures", a.callFails)
	}
	a.callFails, a.callErr = 0, nil
	a.server = &srv
	if srv.HeartbeatIntervalSecs > 0 {
		a.interval = time.Duration(srv.HeartbeatIntervalSecs * float64(time.Second))
	}
}

func (a *Agent) callFailed(call string, err error) {
	a.callFails++
	a.callErr = err
	level := slog.LevelWarn
	if classify(err) == outcomeRejected {
		level = slog.LevelError
	}
	a.log.Log(context.Background(), level, call+" failed", "err", err, "failures", a.callFails, "retry_in", a.retryDelay().Round(time.Millisecond))
}

// connect opens a session (over stdio: starts the command).
func (a *Agent) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, a.opts.ConnectTimeout)
	defer cancel()
	denied := a.deniedCount()
	s, err := mcpinspect.Connect(cctx, a.opts.Target, mcpinspect.Options{
		OnToolsChanged: a.toolsChanged,
		TerminateGrace: a.opts.TerminateGrace,
	})
	if err != nil {
		if ctx.Err() == nil {
			a.scheduleReconnect()
			if a.deniedCount() != denied && a.registered == nil && !a.refused {
				// Not registered yet: nothing to heartbeat, but the cause
				// is worth saying at once.
				a.refused = true
				a.log.Warn("the MCP server refuses the agent's credentials (401/403): check --mcp-header")
			}
			a.log.Warn("connect to the MCP server", "err", err, "retry_in", a.untilReconnect().Round(time.Millisecond))
		}
		return err
	}
	a.sess, a.connectedAt, a.dirty, a.refused = s, a.clock.Now(), true, false
	info := s.Info()
	a.log.Info("connected to the MCP server", "server_name", info.Name, "server_version", info.Version, "protocol", info.Protocol)
	return nil
}

// toolsChanged is called by the SDK: it only signals the loop.
func (a *Agent) toolsChanged() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// describe learns the server's report and makes the registration of it.
func (a *Agent) describe(ctx context.Context) (mcpinspect.Registration, error) {
	cctx, cancel := context.WithTimeout(ctx, a.opts.ConnectTimeout)
	defer cancel()
	rep, err := a.sess.Describe(cctx)
	if err != nil {
		return mcpinspect.Registration{}, err
	}
	if a.opts.ProbeRevisions && rep.ProtocolsFrom != mcpinspect.RevisionsDiscover {
		key := rep.Name + "\x00" + rep.Version + "\x00" + rep.Protocol
		probed, ok := a.revisions[key]
		if !ok {
			// Each try has its own ConnectTimeout; what was learned is kept
			// for this server's name, version and revision.
			probed = mcpinspect.ProbeRevisions(ctx, a.opts.Target, mcpinspect.Options{TerminateGrace: a.opts.TerminateGrace},
				rep, a.opts.ConnectTimeout)
			if ctx.Err() != nil {
				return mcpinspect.Registration{}, ctx.Err()
			}
			a.revisions[key] = probed
		}
		rep.Protocols, rep.ProtocolsFrom = probed.Protocols, probed.ProtocolsFrom
	}
	reg, err := rep.Registration(a.opts.Module, a.opts.Version)
	if err != nil {
		return reg, err
	}
	// Over HTTP, the URL probed is where the server is reached.
	if !a.opts.Target.Stdio() {
		if reason := registry.RemoteURLProblem(a.opts.Target.URL); reason != "" {
			reg.Warnings = append(reg.Warnings, "the MCP server's URL is not registered as its remote: it "+reason)
		} else {
			reg.Request.Remotes = []registry.Remote{{Type: registry.RemoteStreamableHTTP, URL: a.opts.Target.URL}}
		}
	}
	return reg, nil
}

// probe pings the server; over HTTP, an answer 401 or 403 counts as
// alive.
func (a *Agent) probe(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, a.opts.ProbeTimeout)
	defer cancel()
	pctx = mcpinspect.WithTraceparent(pctx, a.probeTraceparent())
	denied := a.deniedCount()
	err := a.sess.Ping(pctx)
	switch {
	case err != nil && a.deniedCount() != denied:
		a.refusedNow()
		return nil
	case err == nil:
		a.refused = false
	}
	return err
}

// probeTraceparent is the traceparent of one liveness probe: the server's
// trace id at mcpd (else the configured traceparent's) and a new span id;
// "" when neither is known.
func (a *Agent) probeTraceparent() string {
	traceID := ""
	if a.server != nil {
		traceID = a.server.TraceID
	}
	if !registry.ValidTraceID(traceID) {
		traceID = registry.TraceIDFromTraceparent(a.opts.Traceparent)
	}
	if traceID == "" {
		return ""
	}
	var span [8]byte
	for span == ([8]byte{}) {
		_, _ = cryptorand.Read(span[:])
	}
	return "00-" + traceID + "-" + hex.EncodeToString(span[:]) + "-01"
}

// sessionEnded: the connection closed or the process exited.
func (a *Agent) sessionEnded() {
	err := a.sess.Err()
	a.dropSession()
	a.scheduleReconnect()
	what := "the MCP connection closed"
	if a.opts.Target.Stdio() {
		what = "the MCP server exited"
	}
	a.log.Warn(what+": no heartbeat until it is back", "err", err, "retry_in", a.untilReconnect().Round(time.Millisecond))
}

// dropSession closes the session in the background: closing can take
// seconds (an HTTP server that hangs answers its DELETE late, a stdio
// server is given TerminateGrace at each step), and the loop must go on.
// Run waits for these closes before it returns.
func (a *Agent) dropSession() {
	if a.sess == nil {
		return
	}
	lived := a.clock.Since(a.connectedAt)
	s := a.sess
	a.closing.Add(1)
	go func() {
		defer a.closing.Done()
		_ = s.Close()
	}()
	a.sess = nil
	if lived >= a.opts.RestartMax {
		a.restarts = 0 // it ran long enough: the next restart is quick
	}
}

// scheduleReconnect sets the next connection attempt after the backoff,
// which grows up to RestartMax but never past the heartbeat interval: a
// server that comes back is connected to, and heartbeated, within one.
func (a *Agent) scheduleReconnect() {
	a.restarts++
	wait := client.RetryWait(nil, backoff.Exponential(a.opts.RestartMin, a.opts.RestartMax, a.restarts), a.opts.Jitter, a.interval, a.draw())
	a.reconnectAt = a.clock.Now().Add(wait)
}

func (a *Agent) untilReconnect() time.Duration {
	return max(0, a.reconnectAt.Sub(a.clock.Now()))
}

func (a *Agent) heartbeatDelay() time.Duration { return a.jitter(a.interval) }

// retryDelay is the wait before retrying a failed call to mcpd: the
// backoff, or mcpd's Retry-After when longer, spread by the jitter so that
// a fleet refused at once does not retry at once, and never more than the
// heartbeat interval.
func (a *Agent) retryDelay() time.Duration {
	return client.RetryWait(a.callErr, backoff.Exponential(a.opts.RetryMin, a.opts.RetryMax, max(1, a.callFails)),
		a.opts.Jitter, a.interval, a.draw())
}

// jitter spreads d by up to Jitter either way.
func (a *Agent) jitter(d time.Duration) time.Duration {
	if a.opts.Jitter <= 0 {
		return d
	}
	return time.Duration(float64(d) * (1 + a.opts.Jitter*(2*a.draw()()-1)))
}

// draw returns the source of the jitter.
func (a *Agent) draw() func() float64 {
	if a.opts.Rand != nil {
		return a.opts.Rand.Float64
	}
	return rand.Float64
}

func (a *Agent) sleep(ctx context.Context, d time.Duration) error {
	t := a.clock.NewTimer(d)
	defer t.Stop()
	a.signalWait(d)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.Chan():
		return nil
	}
}

// signalWait tells a test that the agent waits d on its clock.
func (a *Agent) signalWait(d time.Duration) {
	if a.waiting == nil {
		return
	}
	select {
	case a.waiting <- d:
	default: // a test that stopped listening
	}
}

// shutdown deregisters the server, bounded by DeregisterTimeout.
func (a *Agent) shutdown(ctx context.Context) {
	if a.server == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.DeregisterTimeout)
	defer cancel()
	if _, err := a.opts.Registry.Deregister(dctx, a.server.ServerID); err != nil {
		a.log.Warn("deregister failed", "server_id", a.server.ServerID, "err", err)
		return
	}
	a.log.Info("deregistered", "server_id", a.server.ServerID)
}

// Outcomes of a call to mcpd.
type outcome int

const (
	outcomeOK           outcome = iota
	outcomeNotFound             // 404: mcpd does not know the server
	outcomeDeregistered         // 409: deregistered by someone
	outcomeTransient            // unreachable, 5xx, 408, 429: retry
	outcomeRejected             // another 4xx: retrying the same will not help
)

func classify(err error) outcome {
	if err == nil {
		return outcomeOK
	}
	var p *apiwire.Problem
	if !errors.As(err, &p) {
		return outcomeTransient
	}
	switch {
	case p.Status == http.StatusNotFound:
		return outcomeNotFound
	case p.Status == http.StatusConflict:
		return outcomeDeregistered
	case p.Status == http.StatusRequestTimeout, p.Status == http.StatusTooManyRequests, p.Status >= 500:
		return outcomeTransient
	}
	return outcomeRejected
}
