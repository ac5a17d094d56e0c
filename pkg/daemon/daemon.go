package daemon

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/board"
	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/limit"
	"github.com/cyberos/mcpd/pkg/mcpserve"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/tracing"
	"github.com/cyberos/mcpd/pkg/version"
)

// Limits of the HTTP server, beyond the configured request timeout.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
	// writeSlack is what the write timeout allows beyond the request
	// timeout, so that a timed-out call still gets its 503 out.
	writeSlack = 10 * time.Second
	// startPingTimeout bounds the store check at start.
	startPingTimeout = 5 * time.Second
)

// Options are the daemon's dependencies.
type Options struct {
	// Logger receives every log line; nil: discarded.
	Logger *slog.Logger
	// Stdout receives the --dev banner; nil: discarded.
	Stdout io.Writer
	// Clock drives the monitor and, when set, the store's timestamps; nil:
	// the real clock, and PostgreSQL's now() for the store.
	Clock clockwork.Clock
	// Getenv reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID, and
	// whether the OTEL_* variables turn traces on; nil: os.Getenv. (With
	// traces on, the OpenTelemetry SDK reads the rest of its OTEL_*
	// settings from the process environment.)
	Getenv func(string) string
	// TLSCheckInterval is how often the TLS files are looked at for a
	// change (on a handshake, timed by Clock); zero: DefaultTLSCheckInterval.
	TLSCheckInterval time.Duration
	// Reload makes Run call Reload at each value received (SIGHUP in
	// main); nil: never.
	Reload <-chan os.Signal
	// ReadHeaderTimeout bounds reading a request's headers on every
	// listener; zero: 5 s.
	ReadHeaderTimeout time.Duration
}

// Daemon is one mcpd: store, monitor and HTTP API.
type Daemon struct {
	cfg    config.Config
	logger *slog.Logger
	stdout io.Writer
	clock  clockwork.Clock
	// storeClock is the clock given to the store: nil in production
	// with PostgreSQL, whose now() decides.
	storeClock clockwork.Clock
	notifier   *notifier
	getenv     func(string) string
	tlsCheck   time.Duration
	reload     <-chan os.Signal

	mu      sync.Mutex
	started bool
	stopped bool
	stopErr error
	done    chan struct{} // closed when Stop has finished

	ln         net.Listener
	tls        *tlsReloader // nil without TLS
	srv        *http.Server
	adminLn    net.Listener // --admin-listen; nil when off
	adminSrv   *http.Server
	headerWait time.Duration   // ReadHeaderTimeout of every listener
	errorLog   *serverErrorLog // the listeners' error log
	pool       *pgxpool.Pool
	pgStore    *pgstore.Store
	secretFile string // the --dev secret this daemon wrote, removed on stop
	serveErr   chan error

	// tracing exports spans when the environment turns it on; flushed
	// last at stop.
	tracing *tracing.Provider

	// jobs runs the background work until Stop: the change feed's hub,
	// the monitor, the alert dispatcher and the systemd watchdog.
	jobs supervisor
	// stopStreams ends every watch stream (at shutdown).
	stopStreams context.CancelFunc
}

// New returns a daemon for cfg, which must be valid. Nothing is opened
// before Start.
func New(cfg config.Config, opts Options) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	d := &Daemon{cfg: cfg, storeClock: opts.Clock, tlsCheck: opts.TLSCheckInterval, reload: opts.Reload,
		done:       make(chan struct{}),
		logger:     cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		stdout:     cmp.Or[io.Writer](opts.Stdout, io.Discard),
		clock:      cmp.Or[clockwork.Clock](opts.Clock, clockwork.NewRealClock()),
		headerWait: cmp.Or(max(opts.ReadHeaderTimeout, 0), readHeaderTimeout),
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv // a func: cmp.Or takes comparable values only
	}
	d.getenv = getenv
	d.notifier = newNotifier(getenv, d.logger)
	return d, nil
}

// Start opens the store, starts the monitor and listens; it returns once
// the API accepts connections (and systemd has been told READY=1). A
// failure leaves nothing open.
func (d *Daemon) Start(ctx context.Context) (err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.stopped {
		return errors.New("start: already started")
	}
	d.started = true
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.ShutdownTimeout)
			defer cancel()
			_ = d.jobs.stop(sctx)
			_ = d.closeResources(sctx)
		}
	}()

	verifier, demo, err := d.openVerifier()
	if err != nil {
		return err
	}
	if d.tracing, err = tracing.New(ctx, d.getenv, d.logger); err != nil {
		return err
	}
	tp := d.tracing.TracerProvider()
	backend, err := d.openStore(ctx, tp)
	if err != nil {
		return err
	}

	metrics := api.NewMetrics(api.MetricsOptions{Registry: prometheus.NewRegistry(), Counter: backend, Logger: d.logger})
	sink := metrics.Sink(lifecycle.LogSink{Logger: d.logger})
	dispatcher, err := d.newDispatcher(backend, metrics.Registry(), tp)
	if err != nil {
		return err
	}
	if dispatcher != nil {
		// Delivery reads the audit trail (the outbox); the sink only wakes it.
		sink = alertWaker{next: sink, dispatcher: dispatcher}
	}
	hub := feed.NewHub(feed.Options{Source: backend, Logger: d.logger, OnPoll: metrics.ObserveFeedRead})
	// The hub learns of this process's own writes at once, so that the
	// MCP registry API's ETag reflects them before it reads them.
	sink = hub.Sink(sink)
	// Heartbeats of healthy servers are held in memory and written every
	// flush window; the feed tells the Registrar of other replicas'
	// transitions (lifecycle/held.go).
	flush := d.cfg.EffectiveHeartbeatFlushInterval()
	if flush < d.cfg.HeartbeatFlushInterval {
		d.logger.Warn("heartbeat flush window cut to a quarter of the heartbeat interval",
			"heartbeat_flush_interval", d.cfg.HeartbeatFlushInterval.String(), "effective", flush.String())
	}
	registrar := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{
		Store: backend, Sink: sink, Logger: d.logger, HeartbeatInterval: d.cfg.HeartbeatInterval,
		MaxServersPerTenant: d.cfg.TenantMaxServers,
		Clock:               d.clock, FlushInterval: flush, Feed: hub, OnFlush: metrics.ObserveHeldFlush,
	})
	hub.Observe(registrar)
	guard := newGuardMetrics(metrics.Registry())
	if dispatcher != nil {
		guard.onMassLoss = dispatcher.MassLoss
	}
	monitor := lifecycle.NewMonitor(lifecycle.MonitorOptions{
		Store: backend, Sink: sink, Logger: d.logger, Clock: d.clock,
		HeartbeatInterval: d.cfg.HeartbeatInterval, Period: d.cfg.MonitorPeriod, Observe: metrics.ObserveSweep,
		BlindAfter: d.cfg.BlindAfter, OnBlind: guard.blind,
		MassLossShare: d.cfg.MassLossShare, MassLossMin: d.cfg.MassLossMin, OnMassLoss: guard.massLoss,
		Trace: sweepTracer(tp),
		Grace: lifecycle.SweepGrace(flush), BeforeSweep: registrar.Flush,
		Unwritten: registrar.Unwritten,
	})
	cursorKey := backend.CursorKey
	if d.cfg.Dev && (d.cfg.AuthJWTSecretFile != "" || d.cfg.AuthJWKSFile != "") {
		cursorKey = devCursorKey(d.cfg.AuthJWTSecretFile, d.cfg.AuthJWKSFile)
	}
	// Watch streams end when the server shuts down (RegisterOnShutdown).
	var streams context.Context
	streams, d.stopStreams = context.WithCancel(context.WithoutCancel(ctx))
	mcpHandler := mcpserve.New(mcpserve.Options{
		Reader: mcpserve.Reader{ServerSource: registrar, SkillSource: backend}, Feed: hub, Version: version.Version, Logger: d.logger, Streams: streams,
		RequestTimeout: d.cfg.RequestTimeout,
		MaxSessions:    d.cfg.MCPMaxSessions, MaxSessionsPerSubject: cmp.Or(d.cfg.MCPMaxSessionsPerSubject, -1),
	})
	var ui, uiRedirect http.Handler
	if d.cfg.UI {
		ui, uiRedirect = board.Handler(), board.Redirect()
	}
	handler := api.NewHandler(api.HandlerOptions{
		Registrar: registrar, Verifier: verifier, Logger: d.logger, Metrics: metrics,
		// Ready: the store answers, writable, at this build's schema, and the
		// monitor's last sweep succeeded.
		Pinger: api.ReadyChecks{
			{Name: "store", Check: backend},
			{Name: "monitor", Check: api.PingFunc(func(context.Context) error { return monitor.Healthy() })},
		},
		RequestTimeout: d.cfg.RequestTimeout,
		Feed:           hub, CursorKey: cursorKey, Streams: streams,
		Catalog: backend, RegistryNamespace: d.cfg.RegistryNamespace, RegistryPublicTenant: d.cfg.PublicTenant(),
		Limits: limit.New(limit.Options{
			Rate: d.cfg.TenantRateLimit, Burst: d.cfg.TenantRateBurst, MaxWatches: d.cfg.TenantMaxWatches,
		}),
		Tracer: tp,
		MCP:    mcpHandler,
		UI:     ui, UIRedirect: uiRedirect,
	})

	maxConns, err := d.connectionCap()
	if err != nil {
		return err
	}
	if d.cfg.TLSCertFile != "" {
		d.tls, err = newTLSReloader(d.cfg.TLSCertFile, d.cfg.TLSKeyFile, d.cfg.TLSClientCAFile, d.logger, d.clock,
			d.tlsCheck, metrics.Registry())
		if err != nil {
			return err
		}
	}

	var tlsMetrics prometheus.Registerer
	if d.tls != nil {
		tlsMetrics = metrics.Registry()
	}
	d.errorLog = newServerErrorLog(d.logger, d.clock, tlsMetrics)
	if err := d.listenAdmin(ctx, handler); err != nil {
		return err
	}
	var lc net.ListenConfig
	raw, err := lc.Listen(ctx, "tcp", d.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", d.cfg.Listen, err)
	}
	limiter := newConnLimiter(raw, maxConns)
	var ln net.Listener = limiter
	if d.tls != nil {
		ln = tls.NewListener(ln, d.tls.serverConfig())
	}
	d.ln = ln
	d.srv = d.httpServer(handler)
	d.srv.ConnState = limiter.connState
	d.srv.RegisterOnShutdown(d.stopStreams)
	d.serveErr = make(chan error, 2)
	var serving sync.WaitGroup
	serve := func(srv *http.Server, ln net.Listener, what string) {
		serving.Add(1)
		go func() {
			defer serving.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.serveErr <- fmt.Errorf("serve %s: %w", what, err)
			}
		}()
	}
	serve(d.srv, ln, "api")
	if d.adminSrv != nil {
		serve(d.adminSrv, d.adminLn, "admin")
	}
	go func() {
		serving.Wait()
		close(d.serveErr)
	}()

	if err := d.jobs.start(ctx, "change feed", runFunc(func(ctx context.Context) error {
		hub.Run(ctx)
		return nil
	})); err != nil {
		return err
	}
	if err := d.jobs.start(ctx, "monitor", monitor); err != nil {
		return err
	}
	// After the monitor: it stops after the requests drained and the
	// monitor's last sweep, and writes what is held before mcpd exits.
	if err := d.jobs.start(ctx, "held heartbeats", runFunc(registrar.Run)); err != nil {
		return err
	}

	storeKind := "postgres"
	if d.cfg.Dev {
		storeKind = "memory"
	}
	d.logger.Info("mcpd listening", "addr", ln.Addr().String(), "version", version.Version, "store", storeKind,
		"heartbeat_interval", d.cfg.HeartbeatInterval.String(), "monitor_period", d.cfg.MonitorPeriod.String(),
		"heartbeat_flush_interval", flush.String(),
		"tls", d.tls != nil, "mtls", d.cfg.TLSClientCAFile != "", "max_connections", maxConns,
		"traces", d.tracing.Enabled())
	if dispatcher != nil {
		if err := d.jobs.start(ctx, "alert delivery", runFunc(dispatcher.Run)); err != nil {
			return err
		}
	}
	d.notifier.notify("READY=1\nSTATUS=serving on " + ln.Addr().String())
	if d.notifier.watchdog > 0 {
		if err := d.jobs.start(ctx, "watchdog", runFunc(d.notifier.runWatchdog)); err != nil {
			return err
		}
	}
	if demo != nil {
		demo.board = d.cfg.UI
		demo.print(d.stdout, d.baseURL())
	}
	return nil
}

// openVerifier loads the configured key files; with --dev and no secret
// file it makes a fresh secret and a demo token.
func (d *Daemon) openVerifier() (*auth.Verifier, *devBanner, error) {
	secretFile := d.cfg.AuthJWTSecretFile
	var demo *devBanner
	if d.cfg.Dev {
		var err error
		if secretFile == "" {
			if secretFile, err = writeDevSecret(); err != nil {
				return nil, nil, err
			}
			d.secretFile = secretFile
		}
		if demo, err = newDevBanner(secretFile, d.cfg.PublicTenant(), time.Now()); err != nil {
			return nil, nil, err
		}
		demo.generated = d.secretFile != ""
		demo.mcpctl = startedMcpctlCommand()
	}
	v, err := auth.LoadVerifier(secretFile, d.cfg.AuthJWKSFile)
	if err != nil {
		return nil, nil, err
	}
	return v, demo, nil
}

// openStore opens the in-memory store (--dev) or a PostgreSQL pool. A
// database that does not answer yet is not fatal: /readyz says so until it
// does, and the pool connects when it can.
func (d *Daemon) openStore(ctx context.Context, tp trace.TracerProvider) (store.Backend, error) {
	if d.cfg.Dev {
		return memstore.New(d.clock), nil
	}
	pool, err := pgstore.ConnectTraced(ctx, d.cfg.DatabaseURL, tp)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	d.pool = pool
	pg := pgstore.New(pool, pgstore.Options{Clock: d.storeClock, Logger: d.logger, Tracer: tp,
		CoordinatorReads: !d.cfg.CitusWorkerReads})
	d.pgStore = pg
	pctx, cancel := context.WithTimeout(ctx, startPingTimeout)
	defer cancel()
	if err := pg.Ping(pctx); err != nil {
		d.logger.Warn("store not ready at start; serving 503 until it is", "err", err)
	}
	return pg, nil
}

// adminPaths are what the admin listener serves.
var adminPaths = []string{"GET /healthz", "GET /readyz", "GET /metrics"}

// listenAdmin opens the --admin-listen listener, when set: plain HTTP (a
// kubelet or systemd probe has no client certificate), /healthz, /readyz
// and /metrics of handler only, without the API's connection cap, and with
// the same bounds on reading a request.
func (d *Daemon) listenAdmin(ctx context.Context, handler http.Handler) error {
	if d.cfg.AdminListen == "" {
		return nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", d.cfg.AdminListen)
	if err != nil {
		return fmt.Errorf("listen on %s (--%s): %w", d.cfg.AdminListen, config.KeyAdminListen, err)
	}
	mux := http.NewServeMux()
	for _, p := range adminPaths {
		mux.Handle(p, handler)
	}
	d.adminLn = ln
	d.adminSrv = d.httpServer(mux)
	d.logger.Info("mcpd admin listener", "addr", ln.Addr().String(), "serves", "/healthz /readyz /metrics")
	return nil
}

// AdminAddr returns the address of the --admin-listen listener, once
// started; "" when it is off.
func (d *Daemon) AdminAddr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.adminLn == nil {
		return ""
	}
	return d.adminLn.Addr().String()
}

// Addr returns the address the API listens on, once started.
func (d *Daemon) Addr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ln == nil {
		return ""
	}
	return d.ln.Addr().String()
}

// baseURL is the URL a client on this host reaches the API at.
func (d *Daemon) baseURL() string {
	host, port, _ := net.SplitHostPort(d.ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http://"
	if d.tls != nil {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, port)
}

// Reload re-reads what can change without a restart, at once: the TLS
// certificate, key and client CA files. An error leaves the previous ones
// in service (and is logged); without TLS there is nothing to reload.
func (d *Daemon) Reload() error {
	d.mu.Lock()
	r := d.tls
	d.mu.Unlock()
	if r == nil {
		d.logger.Info("reload: nothing to reload without TLS")
		return nil
	}
	return r.Reload()
}

// connectionCap is --max-connections fitted to the open-file limit, less
// what the database pool and files need.
func (d *Daemon) connectionCap() (int, error) {
	want := d.cfg.MaxConnections
	limit, err := openFileLimit()
	if err != nil {
		d.logger.Debug("open-file limit unknown; connection cap not checked", "err", err)
		return want, nil
	}
	reserve := fdReserveBase
	if d.pool != nil {
		reserve += int(d.pool.Config().MaxConns)
	}
	got, err := fitConnections(want, want == config.DefaultMaxConnections, limit, reserve)
	if err != nil {
		return 0, err
	}
	if got != want {
		d.logger.Warn("connection cap lowered to fit the open-file limit", "max_connections", got,
			"open_file_limit", limit, "reserved", reserve)
	}
	return got, nil
}

// Run starts the daemon and serves until ctx ends or serving fails, then
// stops it. A stop on ctx's end is a clean exit.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.Start(ctx); err != nil {
		return err
	}
	var serveErr error
wait:
	for {
		select {
		case <-ctx.Done():
			d.logger.Info("stopping", "cause", context.Cause(ctx).Error())
			break wait
		case serveErr = <-d.serveErr:
			break wait
		case <-d.reload:
			d.logger.Info("reloading")
			_ = d.Reload()
		}
	}
	stopErr := d.Stop(context.WithoutCancel(ctx))
	return errors.Join(serveErr, stopErr)
}

// Stop stops accepting connections, drains in-flight requests, stops the
// monitor after its current sweep and closes the store, all bounded by the
// shutdown timeout (and ctx). It is idempotent: later calls wait for the
// first and return its result.
func (d *Daemon) Stop(ctx context.Context) error {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		return d.stopErr
	}
	d.stopped = true
	d.mu.Unlock()
	defer close(d.done)

	if !d.started {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ShutdownTimeout)
	defer cancel()
	d.notifier.notify("STOPPING=1")
	var errs []error
	if d.srv != nil {
		if err := d.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("drain requests: %w", err))
			_ = d.srv.Close()
		}
	}
	if d.adminSrv != nil {
		if err := d.adminSrv.Shutdown(ctx); err != nil {
			_ = d.adminSrv.Close()
		}
	}
	if err := d.jobs.stop(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := d.closeResources(ctx); err != nil {
		errs = append(errs, err)
	}
	d.stopErr = errors.Join(errs...)
	if d.stopErr != nil {
		d.logger.Warn("mcpd stopped", "err", d.stopErr)
	} else {
		d.logger.Info("mcpd stopped")
	}
	return d.stopErr
}

// closeResources closes the store and its pool and removes the --dev
// secret file. The store's close is given until ctx ends (closeStore).
func (d *Daemon) closeResources(ctx context.Context) error {
	if d.stopStreams != nil {
		d.stopStreams()
	}
	if d.ln != nil && d.srv == nil {
		_ = d.ln.Close()
	}
	if d.adminLn != nil {
		_ = d.adminLn.Close() // closed already after a Shutdown: harmless
	}
	err := d.closeStore(ctx)
	if d.secretFile != "" {
		if err := os.Remove(d.secretFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.logger.Warn("remove dev secret file", "path", d.secretFile, "err", err)
		}
		d.secretFile = ""
	}
	if d.tracing != nil {
		// Last: the spans of the requests, sweeps and deliveries that
		// just ended are exported before the process exits.
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
		if err := d.tracing.Shutdown(ctx); err != nil {
			d.logger.Warn("flush traces", "err", err)
		}
		cancel()
		d.tracing = nil
	}
	return err
}

// closeStore closes the store and its pool, or gives up when ctx ends
// first. A pool's close waits for each connection's end, and a connection
// whose statement was cut short waits up to 15 s (pgx's bound) for its
// cancel request to reach the server: a database that hangs would hold
// the stop past --shutdown-timeout. What is left is the process's exit's
// to end; the held heartbeats' last write is the jobs', before this.
func (d *Daemon) closeStore(ctx context.Context) error {
	pgStore, pool := d.pgStore, d.pool
	d.pgStore, d.pool = nil, nil
	if pgStore == nil && pool == nil {
		return nil
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		if pgStore != nil {
			pgStore.Close()
		}
		if pool != nil {
			pool.Close()
		}
	}()
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close the database connections: %w", context.Cause(ctx))
	}
}

// httpServer is the http.Server of every listener of mcpd: header reads,
// bodies, answers and idle connections are bounded in time, headers in
// size, and the server's own errors go to the daemon's log.
func (d *Daemon) httpServer(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: d.headerWait,
		ReadTimeout:       readTimeout,
		WriteTimeout:      d.cfg.RequestTimeout + writeSlack,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          d.errorLog.stdLogger(),
	}
}
