package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Monitor is what the health monitor needs of a store: the sweep, and the
// live counts of the mass-heartbeat-loss check.
type Monitor interface {
	Sweeper
	LiveCounter
}

// Sweeper moves silent servers, for the monitor.
type Sweeper interface {
	// Sweep moves every tenant's silent live servers as registry.Classify
	// says, at most req.Limit of them, cascading unhealthy to skills, and
	// returns the events written; with req.BlindAfter set, behind the
	// blind-window rule (SweepRequest).
	Sweep(ctx context.Context, req SweepRequest) (SweepResult, error)
}

// LiveCounter is a store that counts the servers of some tenants that are
// not deregistered, for the mass-heartbeat-loss check.
type LiveCounter interface {
	LiveCounts(ctx context.Context, tenants []uuid.UUID) (map[uuid.UUID]int64, error)
}

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
	// Skip are tenants not to sweep this time: a replica holds heartbeats
	// of theirs that it answered and could not write, so that the store's
	// heartbeat times of their servers are older than what was answered.
	// A tenant skipped counts as one whose sweep failed (a Citus worker
	// that hangs or is down), and its blind window opens when it is swept
	// again. Honoured where one tenant's write can fail alone (Citus); on
	// plain PostgreSQL a write fails for every tenant, and so does the
	// sweep. The sweeping replica knows its own held heartbeats only.
	Skip []uuid.UUID
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
	Events []registry.Event
	// Opened is the blind window this sweep found and closed, if any: it is
	// reported once per window.
	Opened *BlindWindow
}
