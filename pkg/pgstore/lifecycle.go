package pgstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// insertEvent writes one audit event for the server row just changed (its
// values, as the statement that changed it returned them: $1 server, $8
// module, $9 status, $10 trace id, $11 version, $12 protocols), with the
// contract's body, at position $6 of tenant $7 (feedNextSQL), and returns
// it. VALUES, not INSERT ... SELECT from mcp_servers: Citus cannot run an
// INSERT ... SELECT into a table whose key comes from a sequence (a volatile
// function) on the shard, and pulls it through the coordinator instead
// (docs/scaling.md). A deregistration's event; mcp_register writes a
// registration's the same way.
const insertEvent = `
INSERT INTO mcp_audit_events
    (event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at, body,
     position)
VALUES (gen_random_uuid(), $7, $2, $1, $8, $3, $9, $10, $4,
        mcp_audit_body($1, $8, $9, $11, $12::text[], to_jsonb($5::text[])),
        $6)
RETURNING ` + eventColumns

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

// feedNextSQL takes the tenant's next feed position for an event (0017):
// a statement of its own, which Citus routes to the tenant's shard (inside
// a statement on a shard it could not run).
const feedNextSQL = `SELECT mcp_feed_next($1::uuid, $2::text, $3::text)`

// addLiveSQL adds $2 to tenant $1's count of live servers.
const addLiveSQL = `
INSERT INTO mcp_tenant_servers AS t (tenant_id, live) VALUES ($1, GREATEST($2::integer, 0))
ON CONFLICT (tenant_id) DO UPDATE SET live = t.live + $2::integer`

// lockTenantCount locks the tenant's count of live servers
// (mcp_tenant_servers), making its row when there is none, until the
// transaction ends: a deregistration takes it before the tenant's feed
// counter, in the order mcp_register takes them. A row lock, so it holds
// through a pooler in transaction mode.
func lockTenantCount(ctx context.Context, tx pgx.Tx, tenant uuid.UUID) error {
	if _, err := tx.Exec(ctx, `
INSERT INTO mcp_tenant_servers AS t (tenant_id, live) VALUES ($1, 0)
ON CONFLICT (tenant_id) DO UPDATE SET live = t.live`, tenant); err != nil {
		return fmt.Errorf("lock tenant count: %w", err)
	}
	return nil
}

// Heartbeat records a heartbeat now, recovering the server when it was
// degraded or unhealthy. Concurrent heartbeats share one commit.
func (s *Store) Heartbeat(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, *registry.Event, error) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return s.batcher.submit(ctx, tenant, serverID, nil)
	}
	ctx, span := s.tracer.Start(ctx, "heartbeat batch", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(dbSystem, attribute.String("db.operation.name", "mcp_heartbeat_healthy")))
	defer span.End()
	srv, ev, err := s.batcher.submit(ctx, tenant, serverID, span)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "heartbeat failed")
	}
	return srv, ev, err
}

// lockServersSQL locks the servers $1 of the current tenant in server_id
// order, so that it cannot deadlock with the heartbeat batches, which lock in
// that order too.
const lockServersSQL = `SELECT status FROM mcp_servers WHERE tenant_id = $2 AND server_id = ANY($1::uuid[]) ORDER BY server_id FOR UPDATE`

// deregisterLocked marks a live server deregistered, makes its skills
// unavailable (all but those unavailable for a reason of their own) and
// audits it, in plain statements of the transaction tx, each naming the
// tenant (on Citus routed to its shard: data-modifying CTEs with an
// INSERT ... SELECT went through every worker, and a worker that was down
// failed every tenant's deregistration). status is the server's, locked;
// position the event's (nil: already deregistered).
func (s *Store) deregisterLocked(ctx context.Context, tx pgx.Tx, tenant, serverID uuid.UUID, status string, position *int64) (registry.Server, *registry.Event, error) {
	if status == string(registry.StatusDeregistered) || position == nil {
		srv, err := scanServer(tx.QueryRow(ctx, `SELECT `+serverColumns+` FROM mcp_servers WHERE tenant_id = $2 AND server_id = $1`, serverID, tenant))
		return srv, nil, err
	}
	srv, err := scanServer(tx.QueryRow(ctx, `
UPDATE mcp_servers
SET status = 'deregistered', deregistered_at = mcp_now($2::timestamptz), status_changed_at = mcp_now($2::timestamptz)
WHERE tenant_id = $3 AND server_id = $1
RETURNING `+serverColumns, serverID, s.now(), tenant))
	if err != nil {
		return registry.Server{}, nil, fmt.Errorf("deregister server: %w", err)
	}
	rows, err := tx.Query(ctx, `
UPDATE mcp_skills SET available = false, unavailable_reason = 'server_deregistered'
WHERE tenant_id = $2 AND server_id = $1 AND (available OR unavailable_reason = 'server_unhealthy')
RETURNING name`, serverID, tenant)
	if err != nil {
		return registry.Server{}, nil, fmt.Errorf("take the skills: %w", err)
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return registry.Server{}, nil, fmt.Errorf("take the skills: %w", err)
	}
	slices.Sort(taken)
	protocols := srv.SupportedProtocols
	if protocols == nil {
		protocols = []string{}
	}
	var at time.Time
	if srv.DeregisteredAt != nil {
		at = *srv.DeregisteredAt
	}
	ev, err := scanEvent(tx.QueryRow(ctx, insertEvent, srv.ServerID, string(registry.KindDeregistered), &status,
		at, taken, *position, tenant, srv.ModuleName, string(srv.Status), nullIfEmpty(srv.TraceID),
		srv.Version, protocols))
	if err != nil {
		return registry.Server{}, nil, fmt.Errorf("audit deregistration: %w", err)
	}
	if _, err := tx.Exec(ctx, addLiveSQL, tenant, -1); err != nil {
		return registry.Server{}, nil, fmt.Errorf("count live servers: %w", err)
	}
	return srv, &ev, nil
}

// Deregister marks the server deregistered; a second call changes nothing.
func (s *Store) Deregister(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, *registry.Event, error) {
	var (
		srv registry.Server
		ev  *registry.Event
	)
	err := s.inTenant(ctx, tenant, func(tx pgx.Tx) error {
		// Lock first, so that the next statement's snapshot sees what a
		// sweep holding the row committed (the skills it took away).
		var status string
		if err := tx.QueryRow(ctx, lockServersSQL, []uuid.UUID{serverID}, tenant).Scan(&status); err != nil {
			return err
		}
		// Then the tenant's live count, which the deregistration changes:
		// before the tenant's feed counter, which the statement's event
		// takes, as a registration takes them (see mcp_feed_next, 0017).
		if err := lockTenantCount(ctx, tx, tenant); err != nil {
			return err
		}
		// Its event's position, when there is an event.
		var position *int64
		if status != string(registry.StatusDeregistered) {
			if err := tx.QueryRow(ctx, feedNextSQL, tenant, string(registry.KindDeregistered), status).Scan(&position); err != nil {
				return fmt.Errorf("take the feed position: %w", err)
			}
		}
		var err error
		srv, ev, err = s.deregisterLocked(ctx, tx, tenant, serverID, status, position)
		return err
	})
	if err != nil {
		return registry.Server{}, nil, err
	}
	return srv, ev, nil
}

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
