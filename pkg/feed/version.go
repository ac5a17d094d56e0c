package feed

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// What a hub knows of each tenant's changes, so that an answer derived from
// the tenant's state can be tagged without reading the store (the MCP
// registry API's ETag): every registration and transition writes an audit
// event, and the hub reads every event.

// LatestReader finds a tenant's latest event at or before a position: the
// hub asks it once per tenant, the first time the tenant's version is asked.
type LatestReader interface {
	LatestPosition(ctx context.Context, tenant uuid.UUID, upTo registry.Position) (registry.Position, error)
}

// ErrNotStarted means the hub has not read the store's horizon yet.
var ErrNotStarted = errors.New("the feed has not started")

// PendingTTL bounds how long an event this process wrote counts as not yet
// read by the hub: past it, the hub has surely read it (it reads every
// event within a few polls) or the store is down.
const PendingTTL = time.Minute

// recentLen is how many of the last events read Wrote can recognise.
const recentLen = 4096

// TenantVersion is what the hub knows of a tenant's changes: two versions
// are equal only if no registration or transition of the tenant committed
// between them, as far as this process can tell.
type TenantVersion struct {
	// Latest is the position of the tenant's latest event at or before the
	// hub's cursor (the zero Position: none). It is the same on every
	// replica that has read as far.
	Latest registry.Position
	// Pending holds, sorted, the ids of the tenant's events that this
	// process committed and the hub has not read yet: a client reads its
	// own writes before the hub catches up.
	Pending []uuid.UUID
}

// tenantMark is a tenant's TenantVersion as the hub keeps it.
type tenantMark struct {
	latest registry.Position
	// known: latest is the tenant's latest event at or before the cursor
	// (the hub read one, or the store said so).
	known   bool
	pending map[uuid.UUID]time.Time // event id: when Wrote was told
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

func (h *Hub) mark(tenant uuid.UUID) *tenantMark {
	m := h.marks[tenant]
	if m == nil {
		m = &tenantMark{}
		h.marks[tenant] = m
	}
	return m
}

// read records an event the hub appended to its ring; h.mu is held.
func (h *Hub) read(ev *registry.Event) {
	m := h.mark(ev.TenantID)
	m.latest, m.known = ev.Position, true
	delete(m.pending, ev.EventID)
	h.recent.add(ev.EventID)
}

// Wrote tells the hub of an event this process committed, until the hub
// reads it. It is a registry.AlertSink's Transition without the context.
func (h *Hub) Wrote(ev registry.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recent.has(ev.EventID) {
		return
	}
	m := h.mark(ev.TenantID)
	now := h.clock.Now()
	if m.pending == nil {
		m.pending = make(map[uuid.UUID]time.Time)
	}
	for id, at := range m.pending {
		if now.Sub(at) > PendingTTL {
			delete(m.pending, id)
		}
	}
	m.pending[ev.EventID] = now
}

// Sink returns an AlertSink that tells h of each event this process wrote
// (Wrote), then passes it to next: what the API's writes go through.
func (h *Hub) Sink(next registry.AlertSink) registry.AlertSink {
	return wroteSink{hub: h, next: next}
}

// wroteSink is Hub.Sink's AlertSink.
type wroteSink struct {
	hub  *Hub
	next registry.AlertSink
}

func (s wroteSink) Transition(ctx context.Context, ev registry.Event) {
	s.hub.Wrote(ev)
	s.next.Transition(ctx, ev)
}

// TenantVersion returns what the hub knows of tenant's changes. The first
// call for a tenant whose events the hub has not read asks lr for its
// latest event at or before the hub's cursor; every later call is answered
// from memory. ErrNotStarted before the hub has started.
func (h *Hub) TenantVersion(ctx context.Context, tenant uuid.UUID, lr LatestReader) (TenantVersion, error) {
	select {
	case <-h.started:
	default:
		return TenantVersion{}, ErrNotStarted
	}
	h.mu.RLock()
	m := h.marks[tenant]
	if m != nil && m.known {
		v := h.version(m)
		h.mu.RUnlock()
		return v, nil
	}
	at := h.cursor
	h.mu.RUnlock()

	// Every event at or before the cursor was read already, so that the
	// tenant's latest one there is what the hub would know had it read
	// them; events after it are the hub's to read.
	latest, err := lr.LatestPosition(ctx, tenant, at)
	if err != nil {
		return TenantVersion{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if at.Epoch != h.cursor.Epoch {
		return TenantVersion{}, ErrReset
	}
	m = h.mark(tenant)
	if !m.known {
		m.latest, m.known = latest, true
	}
	return h.version(m), nil
}

// version is m as a TenantVersion; h.mu is held.
func (h *Hub) version(m *tenantMark) TenantVersion {
	v := TenantVersion{Latest: m.latest}
	now := h.clock.Now()
	for id, at := range m.pending {
		if now.Sub(at) <= PendingTTL {
			v.Pending = append(v.Pending, id)
		}
	}
	slices.SortFunc(v.Pending, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	return v
}
