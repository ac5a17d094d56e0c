package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// AlertOutbox is a store whose audit trail is the alert outbox (the events
// registry.IsAlertEvent names): each destination has a durable cursor,
// claimed by one replica at a time.
type AlertOutbox interface {
	// ClaimAlerts claims destination's cursor and returns the alert events
	// after it (at most limit), oldest first. A nil claim and nil error mean
	// another replica holds the cursor now.
	ClaimAlerts(ctx context.Context, destination string, limit int) (AlertClaim, error)
	// PendingAlerts counts the alert events destination has not yet
	// acknowledged, and when the oldest of them occurred (zero if none).
	PendingAlerts(ctx context.Context, destination string) (int64, time.Time, error)
	// UnhealthyServers lists every tenant's unhealthy servers, for
	// re-sending firing alerts; a *PartialReadError when some tenants'
	// are missing.
	UnhealthyServers(ctx context.Context) ([]UnhealthyServer, error)
}

// PartialReadError is a read across tenants (UnhealthyServers,
// FiringSkillAlerts) that answered for some tenants only: on Citus, while
// a worker is down, the tenants of the workers that answered. The rows
// returned with it are those tenants' whole answer; Unanswered's are
// missing, and so are those of tenants the store did not know of.
type PartialReadError struct {
	// Unanswered are the tenants the read has no answer for.
	Unanswered []uuid.UUID
	// Err is the first failure.
	Err error
}

func (e *PartialReadError) Error() string {
	return fmt.Sprintf("no answer for %d tenants: %v", len(e.Unanswered), e.Err)
}

func (e *PartialReadError) Unwrap() error { return e.Err }

// AlertClaim is a claimed batch of alert events for one destination.
// Exactly one of Ack or Release ends it.
type AlertClaim interface {
	Events() []registry.Event
	// Ack moves the cursor past the first n events (those delivered) and
	// releases the claim.
	Ack(ctx context.Context, n int) error
	// Release gives the claim up without moving the cursor.
	Release(ctx context.Context)
}

// UnhealthyServer is what a firing alert says of an unhealthy server.
type UnhealthyServer struct {
	ServerID        uuid.UUID
	TenantID        uuid.UUID
	ModuleName      string
	Version         string
	LastHeartbeatAt time.Time
	TraceID         string
	UnhealthySince  time.Time
}
