package feed

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/registry"
)

// What a hub knows of each tenant's changes, so that an answer derived from
// the tenant's state can be tagged without reading the store (the MCP
// registry API's ETag): every registration and transition writes an audit
// event, and the tenant's position counts them.

// LatestReader finds a tenant's latest event at or before a position: the
// hub asks it once, when it starts following the tenant for its version.
type LatestReader interface {
	LatestPosition(ctx context.Context, tenant uuid.UUID, upTo registry.Position) (registry.Position, error)
}

// ErrNotStarted means the hub does not run yet.
var ErrNotStarted = errors.New("the feed has not started")

// PendingTTL bounds how long an event this process wrote counts as not yet
// read by the hub: past it, the hub has surely read it (it reads every
// followed tenant within a few polls) or the store is down.
const PendingTTL = time.Minute

// recentLen is how many of the last events read Wrote can recognise.
const recentLen = 4096

// TenantVersion is what the hub knows of a tenant's changes: two versions
// are equal only if no registration or transition of the tenant committed
// between them, as far as this process can tell.
type TenantVersion struct {
	// Latest is the tenant's position as far as the hub has read it: the
	// position of its latest event (the zero Position: none). It is the
	// same on every replica that has read as far.
	Latest registry.Position
	// Pending holds, sorted, the ids of the tenant's events that this
	// process committed and the hub has not read yet: a client reads its
	// own writes before the hub catches up.
	Pending []uuid.UUID
}

// recentIDs is a ring of the ids of the events read last.
type recentIDs struct {
	ring []uuid.UUID
	next int
	set  map[uuid.UUID]struct{}
}

func (r *recentIDs) add(id uuid.UUID) {
	if r.set == nil {
		r.ring, r.set = make([]uuid.UUID, recentLen), make(map[uuid.UUID]struct{}, recentLen)
	}
	delete(r.set, r.ring[r.next])
	r.ring[r.next] = id
	r.set[id] = struct{}{}
	r.next = (r.next + 1) % recentLen
}

func (r *recentIDs) has(id uuid.UUID) bool {
	_, ok := r.set[id]
	return ok
}

// read records an event of tf the hub read; h.mu is held.
func (h *Hub) read(tf *tenantFeed, ev *registry.Event) {
	delete(tf.pending, ev.EventID)
	h.recent.add(ev.EventID)
	if h.observer != nil {
		h.observer.Read(*ev)
	}
}

// Wrote tells the hub of an event this process committed, until the hub
// reads it. It is a lifecycle.TransitionSink's Transition without the context.
// An event of a tenant the hub does not follow needs no note: the hub
// starts following a tenant from a read made after the call that asks.
func (h *Hub) Wrote(ev registry.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The observer learns of this process's own transitions (its
	// monitor's sweeps) at once, before the hub reads them.
	if h.observer != nil {
		h.observer.Read(ev)
	}
	tf := h.tenants[ev.TenantID]
	if tf == nil || h.recent.has(ev.EventID) {
		return
	}
	now := h.clock.Now()
	if tf.pending == nil {
		tf.pending = make(map[uuid.UUID]time.Time)
	}
	for id, at := range tf.pending {
		if now.Sub(at) > PendingTTL {
			delete(tf.pending, id)
		}
	}
	tf.pending[ev.EventID] = now
}

// Sink returns a TransitionSink that tells h of each event this process wrote
// (Wrote), then passes it to next: what the API's writes go through.
func (h *Hub) Sink(next lifecycle.TransitionSink) lifecycle.TransitionSink {
	return wroteSink{hub: h, next: next}
}

// wroteSink is Hub.Sink's TransitionSink.
type wroteSink struct {
	hub  *Hub
	next lifecycle.TransitionSink
}

func (s wroteSink) Transition(ctx context.Context, ev registry.Event) {
	s.hub.Wrote(ev)
	s.next.Transition(ctx, ev)
}

// TenantVersion returns what the hub knows of tenant's changes. The first
// call for a tenant the hub does not follow asks lr for its latest event
// and follows the tenant from there; every later call is answered from
// memory, while the tenant is asked for at least every IdleTimeout.
// ErrNotStarted before the hub runs.
func (h *Hub) TenantVersion(ctx context.Context, tenant uuid.UUID, lr LatestReader) (TenantVersion, error) {
	select {
	case <-h.started:
	default:
		return TenantVersion{}, ErrNotStarted
	}
	h.mu.Lock()
	if tf := h.tenants[tenant]; tf != nil && tf.err == nil && closed(tf.ready) {
		tf.usedAt = h.clock.Now()
		v := h.version(tf)
		h.mu.Unlock()
		return v, nil
	}
	h.mu.Unlock()
	tf, err := h.acquire(ctx, tenant, false, func(ctx context.Context) (registry.Position, error) {
		return lr.LatestPosition(ctx, tenant, present)
	})
	if err != nil {
		return TenantVersion{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.version(tf), nil
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// version is tf as a TenantVersion; h.mu is held.
func (h *Hub) version(tf *tenantFeed) TenantVersion {
	v := TenantVersion{Latest: tf.cursor}
	if v.Latest.Seq == 0 {
		v.Latest = registry.Position{}
	}
	now := h.clock.Now()
	for id, at := range tf.pending {
		if now.Sub(at) <= PendingTTL {
			v.Pending = append(v.Pending, id)
		}
	}
	slices.SortFunc(v.Pending, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	return v
}
