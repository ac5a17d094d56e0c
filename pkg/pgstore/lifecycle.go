package pgstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Register creates or updates the (tenant, module) server, its skills and
// the registered event, in one transaction, under the tenant quota quota
// (0: none): one call of mcp_register, which Citus hands whole to the
// worker of the tenant's shard, or which the store makes there
// (writeQueryOn); on Citus, registrations that arrive
// together share a call of their worker (registergroup.go), but for one
// whose trace is recorded.
func (s *Store) Register(ctx context.Context, tenant uuid.UUID, info registry.ServerInfo, quota int) (registry.Server, bool, registry.Event, error) {
	reg := newRegistration(tenant, info, quota)
	var res registerResult
	// A registration whose trace is recorded goes alone, on its caller's
	// context, so that its statement is a span of that trace.
	citus, err := s.onCitus(ctx)
	if err == nil && citus {
		if err := s.tenantStalled(ctx, tenant); err != nil {
			return registry.Server{}, false, registry.Event{}, err
		}
	}
	if err == nil && citus && !trace.SpanFromContext(ctx).IsRecording() {
		res = s.registerGrouped(ctx, reg)
	} else {
		res = s.registerOne(ctx, reg)
	}
	if res.err == nil && citus {
		s.learnSweptTenant(tenant)
	}
	return res.srv, res.created, res.ev, res.err
}

// registration is what a registration writes: Register's arguments as its
// statement takes them.
type registration struct {
	tenant, newID        uuid.UUID
	module, version      string
	protocols            []string
	capabilities         []byte
	traceID              string
	remotes              []byte
	description, title   *string
	skills, descriptions []string
	quota                int
	// worker is the Citus worker group of the tenant's shard, as the
	// store last read it (0: not known), where the call is made
	// (writeQueryOn).
	worker int64
}

func newRegistration(tenant uuid.UUID, info registry.ServerInfo, quota int) registration {
	reg := registration{tenant: tenant, newID: uuid.New(), module: info.ModuleName, version: info.Version,
		protocols: info.SupportedProtocols, traceID: info.TraceID, remotes: encodeRemotes(info.Remotes),
		description: nullIfEmpty(info.Description), title: nullIfEmpty(info.Title), quota: min(quota, math.MaxInt32),
		skills: make([]string, len(info.Skills)), descriptions: make([]string, len(info.Skills))}
	if len(info.CapabilityAdvertisement) > 0 && string(info.CapabilityAdvertisement) != "null" {
		reg.capabilities = info.CapabilityAdvertisement
	}
	if reg.traceID == "" {
		reg.traceID = registry.NewTraceID()
	}
	if reg.protocols == nil {
		reg.protocols = []string{}
	}
	for i, sk := range info.Skills {
		reg.skills[i], reg.descriptions[i] = sk.Name, sk.Description
	}
	return reg
}

// registerResult is what Register returns.
type registerResult struct {
	srv     registry.Server
	created bool
	ev      registry.Event
	err     error
}

// registerOne makes reg in a call of its own.
func (s *Store) registerOne(ctx context.Context, reg registration) registerResult {
	var (
		r       eventRow
		created bool
	)
	srv, err := scanServer(s.writeQueryRowOn(ctx, reg.worker, registerSQL, reg.tenant, reg.newID, reg.module, reg.version,
		reg.protocols, reg.capabilities, reg.traceID, reg.remotes, reg.description, reg.title,
		reg.skills, reg.descriptions, reg.quota, s.now()), append(r.appendDest(nil), &created)...)
	if err != nil {
		return registerResult{err: translate(err)}
	}
	ev, _, err := r.event()
	if err != nil {
		return registerResult{err: err}
	}
	return registerResult{srv: srv, created: created, ev: ev}
}

// registerSQL registers a server: mcp_register (migrations/functions).
const registerSQL = `SELECT * FROM mcp_register($1::uuid, $2::uuid, $3::text, $4::text, $5::text[], $6::jsonb,
	$7::text, $8::jsonb, $9::text, $10::text, $11::text[], $12::text[], $13::integer, $14::timestamptz)`

// quotaExceededCode is the SQLSTATE of mcp_register's refusal of a new
// server past the tenant's quota, which translate makes
// registry.ErrQuotaExceeded.
const quotaExceededCode = "MCQ01"

// Heartbeat records a heartbeat now, recovering the server when it was
// degraded or unhealthy. Concurrent heartbeats share one commit.
func (s *Store) Heartbeat(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, *registry.Event, error) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return s.batcherFor(ctx, tenant).submit(ctx, tenant, serverID, nil)
	}
	ctx, span := s.tracer.Start(ctx, "heartbeat batch", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(dbSystem, attribute.String("db.operation.name", "mcp_heartbeat_healthy")))
	defer span.End()
	srv, ev, err := s.batcherFor(ctx, tenant).submit(ctx, tenant, serverID, span)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "heartbeat failed")
	}
	return srv, ev, err
}

// Deregister marks the server deregistered, makes its skills unavailable
// and writes its event, in one call of mcp_deregister, which Citus hands
// whole to the worker of the tenant's shard, or which the store makes
// there (writeQueryRowOn); a second call changes nothing.
func (s *Store) Deregister(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, *registry.Event, error) {
	citus, err := s.onCitusFor(ctx, tenant)
	if err != nil {
		return registry.Server{}, nil, err
	}
	var worker int64
	if citus {
		// Not known (the read of Citus's metadata failed): through the
		// coordinator.
		worker = max(s.tenantWorker(ctx, tenant), 0)
	}
	var r eventRow
	srv, err := scanServer(s.writeQueryRowOn(ctx, worker, deregisterSQL, tenant, serverID, s.now()), r.appendDest(nil)...)
	if err != nil {
		return registry.Server{}, nil, translate(err)
	}
	ev, ok, err := r.event()
	if err != nil || !ok {
		return srv, nil, err
	}
	return srv, &ev, nil
}

// deregisterSQL deregisters a server: mcp_deregister (migrations/functions),
// no row when the tenant has no such server.
const deregisterSQL = `SELECT * FROM mcp_deregister($1::uuid, $2::uuid, $3::timestamptz)`

// sweepUnguarded applies at most req.Limit of the transitions due at at
// across every tenant, through mcp_sweep: Sweep without the blind-window
// rule.
func (s *Store) sweepUnguarded(ctx context.Context, at *time.Time, req store.SweepRequest) ([]registry.Event, error) {
	rows, err := s.pool.Query(ctx, `
SELECT 0::bigint, event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at, body
FROM mcp_sweep($1::timestamptz, $2::bigint * interval '1 microsecond', $3::bigint * interval '1 microsecond', $4)`,
		at, degradedLag(req).Microseconds(), unhealthyLag(req).Microseconds(), req.Limit)
	if err != nil {
		return nil, translate(err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registry.Event, error) { return scanEvent(row) })
	if err != nil {
		return nil, translate(err)
	}
	return events, nil
}

// heartbeatRow is one row of the answer of heartbeatBatchSQL: the previous
// status, the updated server (all NULL when nothing changed) and the event
// (all NULL when there was no transition).
type heartbeatRow struct {
	prevID     uuid.UUID
	prevStatus string

	serverID, tenantID                      *uuid.UUID
	module, version, status                 *string
	protocols                               []string
	caps                                    []byte
	lastHeartbeat, registered, deregistered *time.Time
	traceID                                 *string
	remotes                                 []byte
	description, title                      *string

	ev eventRow
}

func (r *heartbeatRow) dest() []any {
	return r.ev.appendDest(append(make([]any, 0, 24), &r.prevID, &r.prevStatus,
		&r.serverID, &r.tenantID, &r.module, &r.version, &r.protocols, &r.caps, &r.status,
		&r.lastHeartbeat, &r.registered, &r.deregistered, &r.traceID, &r.remotes, &r.description, &r.title))
}

func (r *heartbeatRow) server() (registry.Server, error) {
	if r.serverID == nil {
		return registry.Server{}, fmt.Errorf("server row missing after update")
	}
	srv := registry.Server{
		ServerID:           *r.serverID,
		TenantID:           *r.tenantID,
		ModuleName:         *r.module,
		Version:            *r.version,
		SupportedProtocols: r.protocols,
		Status:             registry.Status(*r.status),
		LastHeartbeatAt:    *r.lastHeartbeat,
		RegisteredAt:       *r.registered,
		DeregisteredAt:     r.deregistered,
	}
	if err := finishServer(&srv, r.caps, r.traceID, r.remotes, r.description, r.title); err != nil {
		return registry.Server{}, err
	}
	return srv, nil
}

func (r *heartbeatRow) event() (*registry.Event, error) {
	ev, ok, err := r.ev.event()
	if err != nil || !ok {
		return nil, err
	}
	return &ev, nil
}
