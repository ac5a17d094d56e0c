package registry

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// SweepRequest is one sweep of a Store.
//
// With BlindAfter set, the sweep protects servers from a blind registry:
// after a blind window (a gap longer than BlindAfter since the last
// successful guarded sweep), lag counts from the later of a server's last
// heartbeat and the window's end, so each server gets its full intervals to
// heartbeat again. The last successful sweep is kept in the store, so the
// rule holds across replicas and restarts. A server that really died is
// still marked, later by at most the window's length.
type SweepRequest struct {
	Now      time.Time // zero: the store's clock
	Interval time.Duration
	Limit    int
	// BlindAfter is the gap since the last successful sweep beyond which the
	// registry counts as having been blind; zero (or less) turns the rule
	// off.
	BlindAfter time.Duration
	// Grace is added to every lag at which a server moves (2I, 3I): the
	// flush window of held heartbeats, so that a heartbeat a replica took
	// before the 2I boundary and has not written yet never yields degraded.
	Grace time.Duration
}

// BlindWindow is a time during which the registry could not observe
// heartbeats: from the last successful sweep to the first one after it.
type BlindWindow struct {
	From, Until time.Time
}

// Duration is how long the registry was blind.
func (w BlindWindow) Duration() time.Duration { return w.Until.Sub(w.From) }

// SweepResult is what a sweep did.
type SweepResult struct {
	Events []Event
	// Opened is the blind window this sweep found and closed, if any: it is
	// reported once per window.
	Opened *BlindWindow
}

// LiveCounter is a store that counts the servers of some tenants that are
// not deregistered, for the mass-heartbeat-loss check.
type LiveCounter interface {
	LiveCounts(ctx context.Context, tenants []uuid.UUID) (map[uuid.UUID]int64, error)
}

// MassLoss is a tenant of which more than the set share of live servers
// went unhealthy in one sweep.
type MassLoss struct {
	TenantID  uuid.UUID
	Unhealthy int   // servers that went unhealthy in this sweep
	Live      int64 // servers of the tenant that are not deregistered
}

// Defaults of the mass-heartbeat-loss check.
const (
	DefaultMassLossShare = 0.5
	DefaultMassLossMin   = 10
)
