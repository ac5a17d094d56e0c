package memstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.AlertOutbox = (*Store)(nil)

// errClaimEnded is what Ack says of a claim already acknowledged or released.
var errClaimEnded = errors.New("alert claim already ended")

// alertCursors is, per destination, the sequence of the last event the
// destination acknowledged and whether a caller holds its claim. The zero
// value is ready; the store's lock guards it.
type alertCursors struct {
	acked   map[string]int64
	claimed map[string]bool
}

// isAlertEvent reports whether e goes to the alert outbox.
func isAlertEvent(e *event) bool {
	if e.from == "" {
		return registry.IsAlertEvent(e.kind, nil)
	}
	return registry.IsAlertEvent(e.kind, &e.from)
}

// memClaim is one destination's claimed batch. Events are committed the
// moment they are appended under the store's lock, in sequence order, so
// a batch never misses one that commits late.
type memClaim struct {
	s           *Store
	destination string
	events      []registry.Event
	// through is the last sequence the claim looked at: acknowledging every
	// event moves the cursor there, past the other kinds that lie between.
	through int64
	ended   bool
}

func (c *memClaim) Events() []registry.Event { return c.events }

func (c *memClaim) Ack(ctx context.Context, n int) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.ended {
		return errClaimEnded
	}
	c.ended = true
	delete(c.s.alerts.claimed, c.destination)
	if err := ctx.Err(); err != nil {
		return err
	}
	n = min(max(n, 0), len(c.events))
	to := c.through
	if n < len(c.events) {
		if n == 0 {
			return nil
		}
		to = c.events[n-1].Seq
	}
	if to > c.s.alerts.acked[c.destination] {
		c.s.alerts.acked[c.destination] = to
	}
	return nil
}

func (c *memClaim) Release(context.Context) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if !c.ended {
		c.ended = true
		delete(c.s.alerts.claimed, c.destination)
	}
}

// ClaimAlerts claims destination's cursor and returns at most limit alert
// events after it, oldest first; nil when another caller holds the claim.
// A new destination starts at the beginning of the trail, as in the
// PostgreSQL store.
func (s *Store) ClaimAlerts(ctx context.Context, destination string, limit int) (store.AlertClaim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("claim alerts: limit %d is not positive", limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.alerts.claimed[destination] {
		return nil, nil
	}
	if s.alerts.claimed == nil {
		s.alerts.claimed = make(map[string]bool)
		s.alerts.acked = make(map[string]int64)
	}
	s.alerts.claimed[destination] = true
	after := s.alerts.acked[destination]
	claim := &memClaim{s: s, destination: destination, through: s.seq}

	// Up to limit events from each tenant, merged by sequence.
	var found []*event
	var tenants []uuid.UUID
	for id, t := range s.tenants {
		start, _ := slices.BinarySearchFunc(t.events, after+1, func(e event, seq int64) int { return cmp.Compare(e.seq, seq) })
		taken := 0
		for i := start; i < len(t.events) && taken < limit; i++ {
			if e := &t.events[i]; isAlertEvent(e) {
				found = append(found, e)
				tenants = append(tenants, id)
				taken++
			}
		}
	}
	order := make([]int, len(found))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(found[a].seq, found[b].seq) })
	if len(order) >= limit {
		// A full batch: more alert events may lie past its end, in the
		// tenants cut short, so the cursor must stop there.
		order = order[:limit]
		claim.through = found[order[limit-1]].seq
	}
	claim.events = make([]registry.Event, len(order))
	for i, j := range order {
		claim.events[i] = found[j].public(tenants[j])
	}
	return claim, nil
}

// PendingAlerts counts the alert events destination has not acknowledged
// and returns when the oldest of them occurred (zero if none).
func (s *Store) PendingAlerts(ctx context.Context, destination string) (int64, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return 0, time.Time{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	after := s.alerts.acked[destination]
	var (
		n      int64
		oldest int64
	)
	for _, t := range s.tenants {
		start, _ := slices.BinarySearchFunc(t.events, after+1, func(e event, seq int64) int { return cmp.Compare(e.seq, seq) })
		for i := start; i < len(t.events); i++ {
			if e := &t.events[i]; isAlertEvent(e) {
				n++
				if oldest == 0 || e.occurredAt < oldest {
					oldest = e.occurredAt
				}
			}
		}
	}
	if n == 0 {
		return 0, time.Time{}, nil
	}
	return n, micros(oldest), nil
}

// UnhealthyServers lists every tenant's unhealthy servers, each with the
// time of its latest transition to unhealthy, in registration order.
func (s *Store) UnhealthyServers(ctx context.Context) ([]store.UnhealthyServer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []store.UnhealthyServer{}
	for _, srv := range s.all {
		if srv.status != registry.StatusUnhealthy {
			continue
		}
		u := store.UnhealthyServer{
			ServerID: srv.id, TenantID: srv.tenant, ModuleName: srv.module, Version: srv.version,
			LastHeartbeatAt: micros(srv.lastHeartbeat), TraceID: srv.traceID,
		}
		t := s.tenants[srv.tenant]
		for i := len(srv.events) - 1; i >= 0; i-- {
			if e := &t.events[srv.events[i]]; e.kind == registry.KindUnhealthy {
				u.UnhealthySince = micros(e.occurredAt)
				break
			}
		}
		out = append(out, u)
	}
	return out, nil
}
