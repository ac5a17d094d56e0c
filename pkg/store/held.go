package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Heartbeats held in memory (contract: "Heartbeats are held in memory;
// transitions are durable"): a replica answers a heartbeat of a server it
// knows to be healthy once it holds it, and writes the heartbeats it held
// in windows, each window's latest per server, one call per tenant.

// HeldHeartbeat is one server's latest heartbeat of a window, as the
// replica that took it held it.
type HeldHeartbeat struct {
	ServerID uuid.UUID
	// Age is how long before the write the heartbeat was received: the
	// store records it at its own clock's now minus Age, so that the clocks
	// of the replicas never meet the database's.
	Age time.Duration
}

// HeldOutcome is what writing one held heartbeat found.
type HeldOutcome struct {
	ServerID uuid.UUID
	// Server is the server after the write, when Err is nil. A write that
	// found the server healthy returns only ServerID and Status.
	Server registry.Server
	// Event is the recovery the write committed with the heartbeat, when a
	// sweep had moved the server meanwhile; nil otherwise.
	Event *registry.Event
	// Err is registry.ErrNotFound or registry.ErrDeregistered: the
	// heartbeat was not written; or ErrBusy: not written yet.
	Err error
}

// ErrBusy is a held heartbeat not written because another transaction
// held its server's row: the next flush writes it.
var ErrBusy = errors.New("server row held by another transaction; write it again")

// HeldHeartbeatWriter is a store that writes held heartbeats.
type HeldHeartbeatWriter interface {
	// WriteHeldHeartbeats records tenant's heartbeats beats (each server
	// once) in one transaction: a healthy server's last_heartbeat_at moves
	// to the time it was received (never back), a degraded or unhealthy
	// one recovers with its audit event. It returns one outcome per server
	// that was not simply healthy (recovered, deregistered, not found),
	// or an error and nothing written.
	WriteHeldHeartbeats(ctx context.Context, tenant uuid.UUID, beats []HeldHeartbeat) ([]HeldOutcome, error)
}

// TenantHeld is one tenant's share of a flush of held heartbeats.
type TenantHeld struct {
	Tenant uuid.UUID
	Beats  []HeldHeartbeat
}

// TenantHeldResult is what writing one tenant's share found: as
// WriteHeldHeartbeats answers.
type TenantHeldResult struct {
	Outcomes []HeldOutcome
	Err      error
}

// HeldBatchWriter is a store that writes the held heartbeats of many
// tenants at once, in fewer round trips than one call per tenant.
type HeldBatchWriter interface {
	// WriteHeldBatch writes each tenant's share as WriteHeldHeartbeats
	// would and returns a result per share, in the order given; except
	// that a share whose result is an error may have been written in part
	// (writing it again is harmless: a heartbeat never moves back).
	WriteHeldBatch(ctx context.Context, batch []TenantHeld) []TenantHeldResult
}
