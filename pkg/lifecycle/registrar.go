package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/internal/logsample"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Registrar is the lifecycle of servers as their owners drive it: register,
// heartbeat, deregister. It validates, writes through the Store, logs with
// the server's trace id, and hands each transition to the alert sink; it
// reads servers to report the heartbeat interval in them. Reads that need
// none of this go to the store's roles directly.
//
// Its logs do not grow with the fleet: a heartbeat is logged at info level
// only when it is the first after the server's registration through this
// Registrar or when it changes the server's status (a recovery); every
// other heartbeat is logged at debug level.
type Registrar struct {
	store    store.Store
	sink     TransitionSink
	logger   *slog.Logger
	interval time.Duration
	quota    int
	clock    clockwork.Clock
	// held holds heartbeats of healthy servers until they are written
	// (held.go); nil: every heartbeat is written before it is answered.
	held *holder

	mu sync.Mutex
	// unbeaten holds the servers registered here that have not heartbeated
	// here since, at most maxUnbeaten of them; pending is its length, read
	// without the lock by heartbeats, which skip it when it is empty.
	unbeaten map[uuid.UUID]struct{}
	pending  atomic.Int64
}

// maxUnbeaten bounds the servers a Registrar remembers as registered and
// not yet heartbeating; past it, it starts again (a first heartbeat may
// then be logged at debug level).
const maxUnbeaten = 1 << 16

// RegistrarOptions configures a Registrar.
type RegistrarOptions struct {
	Store             store.Store
	Sink              TransitionSink // nil: transitions are only logged
	Logger            *slog.Logger
	HeartbeatInterval time.Duration // reported in every server object, in seconds
	// MaxServersPerTenant is the most servers that are not deregistered a
	// tenant may have; registering a new module past it fails with
	// ErrQuotaExceeded. 0: no quota.
	MaxServersPerTenant int

	// Clock stamps held heartbeats; nil: the real clock.
	Clock clockwork.Clock
	// FlushInterval, when positive and Feed is set and the store is a
	// store.HeldHeartbeatWriter, holds heartbeats of healthy servers in
	// memory and writes them every FlushInterval (the contract's bounds
	// are the configuration's: config.Validate); Run must then run. Zero:
	// every heartbeat is written before it is answered.
	FlushInterval time.Duration
	// Feed tells the Registrar which tenants' events reach its Read.
	Feed HeldFeed
	// MaxHeld bounds the heartbeats held and not yet written; zero:
	// DefaultMaxHeld.
	MaxHeld int
	// OnFlush, when set, is told of every flush that wrote something.
	OnFlush func(FlushStats)
}

// NewRegistrar returns a Registrar over opts.Store.
func NewRegistrar(opts RegistrarOptions) *Registrar {
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	r := &Registrar{store: opts.Store, logger: logger,
		sink:     cmp.Or[TransitionSink](opts.Sink, LogSink{Logger: logger}),
		interval: cmp.Or(opts.HeartbeatInterval, registry.DefaultHeartbeatInterval),
		quota:    max(opts.MaxServersPerTenant, 0), unbeaten: make(map[uuid.UUID]struct{}),
		clock: cmp.Or[clockwork.Clock](opts.Clock, clockwork.NewRealClock())}
	if w, ok := opts.Store.(store.HeldHeartbeatWriter); ok && opts.FlushInterval > 0 && opts.Feed != nil {
		bw, batches := w.(store.HeldBatchWriter)
		if !batches {
			bw = oneByOne{w}
		}
		r.held = &holder{writer: bw, feed: opts.Feed, clock: r.clock,
			interval: opts.FlushInterval,
			max:      cmp.Or(max(opts.MaxHeld, 0), DefaultMaxHeld), onFlush: opts.OnFlush,
			logger: logger, flushLogs: logsample.NewRepeated(r.clock.Now),
			sink: r.sink, tenants: make(map[uuid.UUID]*heldTenant), flushSlot: make(chan struct{}, 1)}
	}
	return r
}

// Holding reports whether heartbeats of healthy servers are held in
// memory and written in windows.
func (r *Registrar) Holding() bool { return r.held != nil }

// Run writes held heartbeats every flush interval until ctx ends, then
// writes what is left (SIGTERM flushes before the process exits). Without
// holding it returns at once.
func (r *Registrar) Run(ctx context.Context) error {
	if r.held == nil {
		return nil
	}
	return r.held.run(ctx)
}

// Flush writes every held heartbeat now: the monitor's sweep calls it
// first, so that its own replica's heartbeats are in the store. It fails
// only when no write succeeded (the store cannot write): a write that
// failed for some tenants (their Citus worker is down) is logged, and
// those tenants' sweeps fail as well, while the others' go on.
func (r *Registrar) Flush(ctx context.Context) error {
	if r.held == nil {
		return nil
	}
	return r.held.flush(ctx)
}

// Unwritten returns the tenants of which heartbeats were answered from
// memory and their last write failed (kept for the next flush), one of
// them received within the last within: the monitor does not sweep them
// until they are written, or until the heartbeats are too old to keep a
// server from being marked.
func (r *Registrar) Unwritten(within time.Duration) []uuid.UUID {
	if r.held == nil {
		return nil
	}
	return r.held.unwritten(within)
}

// Read is an event the change feed read (feed.Observer): the held
// heartbeats forget its server's status.
func (r *Registrar) Read(ev registry.Event) {
	if r.held != nil {
		r.held.read(ev)
	}
}

// Forget says the change feed no longer follows tenant (uuid.Nil: every
// tenant) (feed.Observer).
func (r *Registrar) Forget(tenant uuid.UUID) {
	if r.held != nil {
		r.held.forgetTenant(tenant)
	}
}

// Register validates info and registers it for tenant; created reports a new
// server. A missing trace id is made here.
func (r *Registrar) Register(ctx context.Context, tenant uuid.UUID, info registry.ServerInfo) (registry.Server, bool, error) {
	if err := info.Validate(); err != nil {
		return registry.Server{}, false, err
	}
	if info.TraceID == "" {
		info.TraceID = registry.NewTraceID()
	}
	srv, created, ev, err := r.store.Register(ctx, tenant, info, r.quota)
	if err != nil {
		return registry.Server{}, false, fmt.Errorf("register %q: %w", info.ModuleName, err)
	}
	r.logger.InfoContext(ctx, "server registered", "tenant_id", tenant.String(), "server_id", srv.ServerID.String(),
		"module_name", srv.ModuleName, "version", srv.Version, "created", created, "trace_id", srv.TraceID)
	r.mu.Lock()
	if len(r.unbeaten) >= maxUnbeaten {
		clear(r.unbeaten)
	}
	r.unbeaten[srv.ServerID] = struct{}{}
	r.pending.Store(int64(len(r.unbeaten)))
	r.mu.Unlock()
	r.sink.Transition(ctx, ev)
	return r.decorate(srv), created, nil
}

// Heartbeat records a heartbeat; a degraded or unhealthy server recovers.
// The first heartbeat after a registration and one that changes the
// status are logged at info level, the others at debug level.
func (r *Registrar) Heartbeat(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, error) {
	var st stamp
	if r.held != nil {
		if srv, ok := r.held.hold(ctx, tenant, serverID, r.clock.Now().UTC().Truncate(time.Microsecond)); ok {
			if r.logger.Enabled(ctx, slog.LevelDebug) {
				r.logger.DebugContext(ctx, "heartbeat", "tenant_id", tenant.String(), "server_id", srv.ServerID.String(),
					"module_name", srv.ModuleName, "status", string(srv.Status), "trace_id", srv.TraceID, "held", true)
			}
			return r.decorate(srv), nil
		}
		st = r.held.before(tenant)
	}
	srv, ev, err := r.store.Heartbeat(ctx, tenant, serverID)
	if err != nil {
		if r.held != nil && errors.Is(err, registry.ErrUnavailable) {
			r.held.failed(tenant)
		}
		return registry.Server{}, fmt.Errorf("heartbeat %s: %w", serverID, err)
	}
	if r.held != nil {
		r.held.learn(st, srv)
	}
	first := r.pending.Load() > 0 && r.firstBeat(srv.ServerID)
	switch {
	case ev != nil:
		from := ""
		if ev.FromStatus != nil {
			from = string(*ev.FromStatus)
		}
		r.logger.InfoContext(ctx, "heartbeat changed status", "tenant_id", tenant.String(), "server_id", srv.ServerID.String(),
			"module_name", srv.ModuleName, "from_status", from, "status", string(srv.Status), "trace_id", srv.TraceID)
	case first:
		r.logger.InfoContext(ctx, "first heartbeat", "tenant_id", tenant.String(), "server_id", srv.ServerID.String(),
			"module_name", srv.ModuleName, "status", string(srv.Status), "trace_id", srv.TraceID)
	case r.logger.Enabled(ctx, slog.LevelDebug):
		r.logger.DebugContext(ctx, "heartbeat", "tenant_id", tenant.String(), "server_id", srv.ServerID.String(),
			"module_name", srv.ModuleName, "status", string(srv.Status), "trace_id", srv.TraceID)
	}
	if ev != nil {
		r.sink.Transition(ctx, *ev)
	}
	return r.decorate(srv), nil
}

// firstBeat forgets id as a server waiting for its first heartbeat and
// reports whether it was one.
func (r *Registrar) firstBeat(id uuid.UUID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.unbeaten[id]
	if ok {
		delete(r.unbeaten, id)
		r.pending.Store(int64(len(r.unbeaten)))
	}
	return ok
}

// Deregister marks a server deregistered; it is idempotent.
func (r *Registrar) Deregister(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, error) {
	srv, ev, err := r.store.Deregister(ctx, tenant, serverID)
	if err != nil {
		return registry.Server{}, fmt.Errorf("deregister %s: %w", serverID, err)
	}
	if r.pending.Load() > 0 {
		r.firstBeat(srv.ServerID)
	}
	if r.held != nil {
		r.held.forget(tenant, srv.ServerID, true)
	}
	if ev != nil {
		r.logger.InfoContext(ctx, "server deregistered", "tenant_id", tenant.String(), "server_id", srv.ServerID.String(),
			"module_name", srv.ModuleName, "trace_id", srv.TraceID)
		r.sink.Transition(ctx, *ev)
	}
	return r.decorate(srv), nil
}

// Server returns one server of tenant.
func (r *Registrar) Server(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, error) {
	srv, err := r.store.Server(ctx, tenant, serverID)
	if err != nil {
		return registry.Server{}, err
	}
	return r.decorate(r.WithHeld(srv)), nil
}

// WithHeld returns srv, read from the store, with its last heartbeat moved
// to the latest this replica holds and has not written yet, so that an
// answer is never a flush window behind the heartbeats taken here.
func (r *Registrar) WithHeld(srv registry.Server) registry.Server {
	if r.held == nil || srv.Status != registry.StatusHealthy {
		return srv
	}
	if at, ok := r.held.latest(srv.TenantID, srv.ServerID); ok && at.After(srv.LastHeartbeatAt) {
		srv.LastHeartbeatAt = at
	}
	return srv
}

// Servers returns a page of tenant's servers.
func (r *Registrar) Servers(ctx context.Context, tenant uuid.UUID, f registry.ServerFilter) (registry.ServerPage, error) {
	page, err := r.store.Servers(ctx, tenant, f)
	if err != nil {
		return registry.ServerPage{}, err
	}
	for i := range page.Servers {
		page.Servers[i] = r.decorate(r.WithHeld(page.Servers[i]))
	}
	return page, nil
}

// Store returns the store the Registrar writes through, for the reads
// that need nothing of the Registrar (skills, the audit trail).
func (r *Registrar) Store() store.Store { return r.store }

func (r *Registrar) decorate(s registry.Server) registry.Server {
	s.HeartbeatIntervalSecs = r.interval.Seconds()
	return s
}
