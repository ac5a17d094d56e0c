package lifecycle

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
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
	store    registry.Store
	sink     registry.AlertSink
	logger   *slog.Logger
	interval float64
	quota    int

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
	Store             registry.Store
	Sink              registry.AlertSink // nil: transitions are only logged
	Logger            *slog.Logger
	HeartbeatInterval float64 // seconds, reported in every server object
	// MaxServersPerTenant is the most servers that are not deregistered a
	// tenant may have; registering a new module past it fails with
	// ErrQuotaExceeded. 0: no quota.
	MaxServersPerTenant int
}

// NewRegistrar returns a Registrar over opts.Store.
func NewRegistrar(opts RegistrarOptions) *Registrar {
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	return &Registrar{store: opts.Store, logger: logger,
		sink:     cmp.Or[registry.AlertSink](opts.Sink, registry.LogSink{Logger: logger}),
		interval: cmp.Or(opts.HeartbeatInterval, registry.DefaultHeartbeatInterval.Seconds()),
		quota:    max(opts.MaxServersPerTenant, 0), unbeaten: make(map[uuid.UUID]struct{})}
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
	info.MaxServers = r.quota
	srv, created, ev, err := r.store.Register(ctx, tenant, info)
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
	srv, ev, err := r.store.Heartbeat(ctx, tenant, serverID)
	if err != nil {
		return registry.Server{}, fmt.Errorf("heartbeat %s: %w", serverID, err)
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
	return r.decorate(srv), nil
}

// Servers returns a page of tenant's servers.
func (r *Registrar) Servers(ctx context.Context, tenant uuid.UUID, f registry.ServerFilter) (registry.ServerPage, error) {
	page, err := r.store.Servers(ctx, tenant, f)
	if err != nil {
		return registry.ServerPage{}, err
	}
	for i := range page.Servers {
		page.Servers[i] = r.decorate(page.Servers[i])
	}
	return page, nil
}

// Store returns the store the Registrar writes through, for the reads
// that need nothing of the Registrar (skills, the audit trail).
func (r *Registrar) Store() registry.Store { return r.store }

func (r *Registrar) decorate(s registry.Server) registry.Server {
	s.HeartbeatIntervalSecs = r.interval
	return s
}
