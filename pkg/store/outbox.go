package store

import (
	"context"
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
	// re-sending firing alerts.
	UnhealthyServers(ctx context.Context) ([]UnhealthyServer, error)
}

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
