package memstore

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.Backend = (*Store)(nil)

// monitorState is the last successful sweep and the latest blind window,
// in microseconds (0: none).
type monitorState struct {
	lastSweep, blindFrom, blindUntil int64
}

// sweepGuardedLocked is Sweep at at behind the blind-window rule; s.mu
// must be held.
func (s *Store) sweepGuardedLocked(at int64, req store.SweepRequest) store.SweepResult {
	st := &s.monitor
	var res store.SweepResult
	if st.lastSweep != 0 && req.BlindAfter > 0 && at-st.lastSweep > req.BlindAfter.Microseconds() {
		st.blindFrom, st.blindUntil = st.lastSweep, at
		res.Opened = &store.BlindWindow{From: time.UnixMicro(st.blindFrom).UTC(), Until: time.UnixMicro(st.blindUntil).UTC()}
	}
	st.lastSweep = max(st.lastSweep, at)
	res.Events = s.sweepLocked(at, req, st.blindUntil)
	return res
}

// LiveCounts counts the given tenants' servers that are not deregistered.
func (s *Store) LiveCounts(ctx context.Context, tenants []uuid.UUID) (map[uuid.UUID]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[uuid.UUID]int64, len(tenants))
	for _, t := range tenants {
		tn := s.tenants[t]
		if tn == nil {
			continue
		}
		for _, srv := range tn.sorted {
			if srv.status != registry.StatusDeregistered {
				out[t]++
			}
		}
	}
	return out, nil
}
