package memstore

import (
	"cmp"
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.AvailabilityReader = (*Store)(nil)

// ServerAvailability is one of tenant's servers' availability over a
// window, from its audit events.
func (s *Store) ServerAvailability(ctx context.Context, tenantID, serverID uuid.UUID, req registry.AvailabilityRequest) (registry.Availability, error) {
	if err := ctx.Err(); err != nil {
		return registry.Availability{}, err
	}
	w, from, to := req.Bounds(s.clock.Now())
	s.mu.RLock()
	defer s.mu.RUnlock()
	srv, err := s.lookup(tenantID, serverID)
	if err != nil {
		return registry.Availability{}, err
	}
	tl := s.timelineLocked(s.tenants[tenantID], srv, from.UnixMicro(), to.UnixMicro())
	return registry.ServerAvailability(w, from, to, tl), nil
}

// SkillAvailability is the availability of a skill name over a window:
// available while one of the servers of tenant that declare it is.
func (s *Store) SkillAvailability(ctx context.Context, tenantID uuid.UUID, name string, req registry.AvailabilityRequest) (registry.Availability, error) {
	if err := ctx.Err(); err != nil {
		return registry.Availability{}, err
	}
	w, from, to := req.Bounds(s.clock.Now())
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.tenants[tenantID]
	if t == nil {
		return registry.Availability{}, registry.ErrSkillNotFound
	}
	var tls []registry.Timeline
	for _, srv := range t.sorted {
		if _, ok := slices.BinarySearchFunc(srv.skills, name, func(e skill, n string) int { return cmp.Compare(e.name, n) }); ok {
			tls = append(tls, s.timelineLocked(t, srv, from.UnixMicro(), to.UnixMicro()))
		}
	}
	if len(tls) == 0 {
		return registry.Availability{}, registry.ErrSkillNotFound
	}
	return registry.SkillAvailability(w, from, to, tls), nil
}

// AvailabilityRatios returns the available share of the window of each of
// tenant's servers among ids, in their order.
func (s *Store) AvailabilityRatios(ctx context.Context, tenantID uuid.UUID, ids []uuid.UUID, req registry.AvailabilityRequest) ([]registry.AvailabilityRatio, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w, from, to := req.Bounds(s.clock.Now())
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []registry.AvailabilityRatio{}
	seen := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		srv, err := s.lookup(tenantID, id)
		if err != nil || seen[id] {
			continue
		}
		seen[id] = true
		a := registry.ServerAvailability(w, from, to, s.timelineLocked(s.tenants[tenantID], srv, from.UnixMicro(), to.UnixMicro()))
		out = append(out, registry.AvailabilityRatio{ServerID: id, ObservedSeconds: a.ObservedSeconds, AvailableRatio: a.AvailableRatio})
	}
	return out, nil
}

// timelineLocked is srv's timeline around [from, to] (microseconds): its
// status before from and its events from from to to, by time and then
// commit order. s.mu must be held.
func (s *Store) timelineLocked(t *tenant, srv *server, from, to int64) registry.Timeline {
	evs := make([]*event, 0, len(srv.events))
	for _, pos := range srv.events {
		if e := &t.events[pos]; e.occurredAt <= to {
			evs = append(evs, e)
		}
	}
	slices.SortStableFunc(evs, func(a, b *event) int {
		return cmp.Or(cmp.Compare(a.occurredAt, b.occurredAt), cmp.Compare(a.seq, b.seq))
	})
	var tl registry.Timeline
	for _, e := range evs {
		if e.occurredAt < from {
			tl.Start = e.to
			continue
		}
		tl.Changes = append(tl.Changes, registry.Change{At: micros(e.occurredAt), To: e.to})
	}
	return tl
}
