package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Backend is every role a store implements: what mcpd's daemon needs of
// one. Both stores satisfy it, checked at compile time.
type Backend interface {
	Store
	Monitor
	StatusCounter
	CatalogReader
	AlertOutbox
	SkillAlerts
	HeldHeartbeatWriter
}

// Store keeps servers, skills and the audit trail. Every method that changes
// a server writes its audit event in the same transaction, or nothing. Tenant
// methods see only that tenant's rows. Timestamps that decide a status come
// from the store's own clock: the database's now() in production, an
// injected clock in tests. It is made of small roles, so that a consumer
// asks for the role it uses (as the feed hub asks for a FeedReader).
type Store interface {
	Lifecycle
	ServerReader
	AuditReader
	AvailabilityReader
	FeedReader
	Sweeper
	// CursorKey returns the secret that seals cursors: the same for every
	// replica of the store and across restarts.
	CursorKey(ctx context.Context) ([]byte, error)
	// Ping reports whether the store answers and its schema is the one this
	// build expects.
	Ping(ctx context.Context) error
}

// Lifecycle changes servers as their owners drive them, each change with
// its audit event.
type Lifecycle interface {
	// Register creates the (tenant, module) server or updates the existing
	// one in place (same server_id), healthy, with the given skills.
	// created reports whether the server is new. When quota is positive, a
	// new (tenant, module) is refused with registry.ErrQuotaExceeded while
	// the tenant has quota servers that are not deregistered;
	// re-registering a module that is not deregistered is always allowed,
	// a deregistered one counts as a new server.
	Register(ctx context.Context, tenant uuid.UUID, info registry.ServerInfo, quota int) (srv registry.Server, created bool, ev registry.Event, err error)
	// Heartbeat records a heartbeat now; from degraded or unhealthy the
	// server recovers, and the returned event is non-nil. ErrNotFound,
	// ErrDeregistered.
	Heartbeat(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, *registry.Event, error)
	// Deregister marks the server deregistered and its skills unavailable.
	// Idempotent: a second call returns the server and a nil event.
	Deregister(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, *registry.Event, error)
}

// ServerReader reads one tenant's servers and skills. Lists are never nil.
type ServerReader interface {
	// Server returns one server. ErrNotFound.
	Server(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, error)
	// Servers returns a page of servers ordered by module name.
	Servers(ctx context.Context, tenant uuid.UUID, f registry.ServerFilter) (registry.ServerPage, error)
	// Skills returns the skills of one server, by name. ErrNotFound.
	Skills(ctx context.Context, tenant, serverID uuid.UUID) ([]registry.Skill, error)
	// FindSkills returns a page of skills across tenant's servers, by name
	// and then module name.
	FindSkills(ctx context.Context, tenant uuid.UUID, f registry.SkillFilter) (registry.SkillPage, error)
}

// AuditReader reads one tenant's audit trail. Lists are never nil.
type AuditReader interface {
	// Events returns a page of audit events in commit order, only events
	// before which nothing can commit any more.
	Events(ctx context.Context, tenant uuid.UUID, f registry.EventFilter) (registry.EventPage, error)
	// CheckPosition returns p as a position of the current epoch when
	// tenant's trail can be resumed after it, else ErrPositionExpired: the
	// one check of a cursor into the trail, for lists and watches alike.
	CheckPosition(ctx context.Context, tenant uuid.UUID, p registry.Position) (registry.Position, error)
}

// AvailabilityReader computes availability from one tenant's audit trail.
type AvailabilityReader interface {
	// ServerAvailability is one server's availability. ErrNotFound.
	ServerAvailability(ctx context.Context, tenant, serverID uuid.UUID, req registry.AvailabilityRequest) (registry.Availability, error)
	// SkillAvailability is the availability of a skill name: available
	// while at least one server offering it is. ErrSkillNotFound when no
	// server of tenant offers it.
	SkillAvailability(ctx context.Context, tenant uuid.UUID, name string, req registry.AvailabilityRequest) (registry.Availability, error)
	// AvailabilityRatios returns the ratio of each of tenant's servers among
	// ids (at most registry.MaxAvailabilityRatios), in the order of ids;
	// ids that are not tenant's servers are left out.
	AvailabilityRatios(ctx context.Context, tenant uuid.UUID, ids []uuid.UUID, req registry.AvailabilityRequest) ([]registry.AvailabilityRatio, error)
}

// FeedReader reads tenants' trails as they commit, for the feed hub: each
// tenant's positions are its own (registry.Position).
type FeedReader interface {
	// Horizon returns tenant's present position: every event of the tenant
	// that commits from now on stands after it.
	Horizon(ctx context.Context, tenant uuid.UUID) (registry.Position, error)
	// ReadFeed returns, for each tenant, at most limit of its events after
	// the position at the same index of after, in commit order, and the
	// horizon of the read: one batch per tenant, in the order asked.
	ReadFeed(ctx context.Context, tenants []uuid.UUID, after []registry.Position, limit int) ([]FeedBatch, error)
	// FeedChanged returns a channel that is closed when the next event
	// commits, or nil when the store cannot tell and its feed is polled.
	FeedChanged() <-chan struct{}
}

// TenantRouter is a store whose FeedReader may route each tenant's reads
// to a node of its own (Citus: the worker that holds the tenant's shard),
// where a read of a few tenants together costs more than a read of each.
type TenantRouter interface {
	// TenantRouted reports whether each tenant's reads are routed to its
	// own node (false while that is not known).
	TenantRouted(ctx context.Context) bool
	// TenantNode returns the node that tenant's reads are routed to (on
	// Citus its worker's group), or -1 when that cannot be known now.
	TenantNode(ctx context.Context, tenant uuid.UUID) int64
}

// HorizonsReader is a store that reads the present positions of several
// tenants in one call, each on its own as Horizon reads it: for a few
// tenants, cheaper than a feed read of them together or a Horizon of
// each.
type HorizonsReader interface {
	// Horizons returns each tenant's present position, read after the
	// call started (never remembered), in the epoch Horizon would give,
	// or the error of its read: positions[i] and errs[i] for tenants[i],
	// both as long as tenants. It keeps no reference to tenants.
	Horizons(ctx context.Context, tenants []uuid.UUID) (positions []registry.Position, errs []error)
}

// NodeHorizonsReader is a HorizonsReader whose read of the positions of
// one node's tenants (TenantRouter.TenantNode) can be waited for until it
// returns, by a caller that runs apart from its own callers and bounds
// their wait by NodeStall instead (the feed hub, whose reads of a node
// run one at a time in a goroutine of their own). Horizons bounds its
// own wait, which on Citus costs each read a goroutine of its own.
type NodeHorizonsReader interface {
	HorizonsReader
	// NodeHorizons is Horizons of tenants of node (TenantNode), waited
	// for until it returns (within ctx), where Horizons waits for a node
	// the stall time at most. Tenants the store now finds on another
	// node, or on none it knows, are read as Horizons reads them.
	NodeHorizons(ctx context.Context, node int64, tenants []uuid.UUID) (positions []registry.Position, errs []error)
	// NodeStall is how long a caller of NodeHorizons waits for a node's
	// read before it answers its own callers that the node is not
	// answering, as Horizons would have.
	NodeStall() time.Duration
}

// FeedBatch is a read of one tenant's trail after a position: the events,
// in commit order, and the horizon, the tenant's position when it was read
// (past every event the read returned). When the read was not cut by its
// limit, no event before Horizon is left to read.
type FeedBatch struct {
	Tenant  uuid.UUID
	Events  []registry.Event
	Horizon registry.Position
}

// StatusCounter is a store that can count servers per status across every
// tenant, for metrics.
type StatusCounter interface {
	CountByStatus(ctx context.Context) (map[registry.Status]int64, error)
}

// CatalogReader is a store that serves the MCP registry API's reads.
type CatalogReader interface {
	// Catalog returns a page of tenant's servers that f selects.
	Catalog(ctx context.Context, tenant uuid.UUID, f registry.CatalogFilter) (registry.CatalogPage, error)
	// LatestPosition returns the position of tenant's latest event at or
	// before upTo (a position the store handed out), or the zero Position
	// when it has none.
	LatestPosition(ctx context.Context, tenant uuid.UUID, upTo registry.Position) (registry.Position, error)
}
