package registry

import (
	"context"

	"github.com/google/uuid"
)

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
	// created reports whether the server is new.
	Register(ctx context.Context, tenant uuid.UUID, info ServerInfo) (srv Server, created bool, ev Event, err error)
	// Heartbeat records a heartbeat now; from degraded or unhealthy the
	// server recovers, and the returned event is non-nil. ErrNotFound,
	// ErrDeregistered.
	Heartbeat(ctx context.Context, tenant, serverID uuid.UUID) (Server, *Event, error)
	// Deregister marks the server deregistered and its skills unavailable.
	// Idempotent: a second call returns the server and a nil event.
	Deregister(ctx context.Context, tenant, serverID uuid.UUID) (Server, *Event, error)
}

// ServerReader reads one tenant's servers and skills. Lists are never nil.
type ServerReader interface {
	// Server returns one server. ErrNotFound.
	Server(ctx context.Context, tenant, serverID uuid.UUID) (Server, error)
	// Servers returns a page of servers ordered by module name.
	Servers(ctx context.Context, tenant uuid.UUID, f ServerFilter) (ServerPage, error)
	// Skills returns the skills of one server, by name. ErrNotFound.
	Skills(ctx context.Context, tenant, serverID uuid.UUID) ([]Skill, error)
	// FindSkills returns a page of skills across tenant's servers, by name
	// and then module name.
	FindSkills(ctx context.Context, tenant uuid.UUID, f SkillFilter) (SkillPage, error)
}

// AuditReader reads one tenant's audit trail. Lists are never nil.
type AuditReader interface {
	// Events returns a page of audit events in commit order, only events
	// before which nothing can commit any more.
	Events(ctx context.Context, tenant uuid.UUID, f EventFilter) (EventPage, error)
	// CheckPosition returns p as a position of the current epoch when
	// tenant's trail can be resumed after it, else ErrPositionExpired: the
	// one check of a cursor into the trail, for lists and watches alike.
	CheckPosition(ctx context.Context, tenant uuid.UUID, p Position) (Position, error)
}

// FeedReader reads tenants' trails as they commit, for the feed hub: each
// tenant's positions are its own (Position).
type FeedReader interface {
	// Horizon returns tenant's present position: every event of the tenant
	// that commits from now on stands after it.
	Horizon(ctx context.Context, tenant uuid.UUID) (Position, error)
	// ReadFeed returns, for each tenant, at most limit of its events after
	// the position at the same index of after, in commit order, and the
	// horizon of the read: one batch per tenant, in the order asked.
	ReadFeed(ctx context.Context, tenants []uuid.UUID, after []Position, limit int) ([]FeedBatch, error)
	// FeedChanged returns a channel that is closed when the next event
	// commits, or nil when the store cannot tell and its feed is polled.
	FeedChanged() <-chan struct{}
}

// Sweeper moves silent servers, for the monitor.
type Sweeper interface {
	// Sweep moves every tenant's silent live servers as Classify says, at
	// most req.Limit of them, cascading unhealthy to skills, and returns the
	// events written; with req.BlindAfter set, behind the blind-window rule
	// (SweepRequest).
	Sweep(ctx context.Context, req SweepRequest) (SweepResult, error)
}

// StatusCounter is a store that can count servers per status across every
// tenant, for metrics.
type StatusCounter interface {
	CountByStatus(ctx context.Context) (map[Status]int64, error)
}
