package memstore

import (
	"context"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.HeldHeartbeatWriter = (*Store)(nil)

// WriteHeldHeartbeats records tenant's held heartbeats at once: a healthy
// server's last heartbeat moves to the time each was received (never
// back), a degraded or unhealthy one recovers with its event, at the
// write's time (after the sweep's event that moved it).
func (s *Store) WriteHeldHeartbeats(ctx context.Context, tenant uuid.UUID, beats []store.HeldHeartbeat) ([]store.HeldOutcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []store.HeldOutcome
	for _, b := range beats {
		srv, err := s.lookup(tenant, b.ServerID)
		if err != nil {
			out = append(out, store.HeldOutcome{ServerID: b.ServerID, Err: err})
			continue
		}
		if srv.status == registry.StatusDeregistered {
			out = append(out, store.HeldOutcome{ServerID: b.ServerID, Err: registry.ErrDeregistered})
			continue
		}
		at := now - max(b.Age, 0).Microseconds()
		srv.lastHeartbeat = max(srv.lastHeartbeat, at)
		if srv.status == registry.StatusHealthy {
			continue
		}
		ev := s.recoverLocked(tenant, srv, now)
		out = append(out, store.HeldOutcome{ServerID: b.ServerID, Server: srv.public(), Event: &ev})
	}
	return out, nil
}
