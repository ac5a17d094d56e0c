package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

var (
	_ heartbeat.GuardedSweeper = (*Store)(nil)
	_ heartbeat.LiveCounter    = (*Store)(nil)
)

// monitorState is the last successful sweep and the latest blind window,
// in microseconds (0: none).
type monitorState struct {
	lastSweep, blindFrom, blindUntil int64
}

// SweepGuarded is Sweep behind the blind-window rule.
func (s *Store) SweepGuarded(ctx context.Context, req heartbeat.SweepRequest) (heartbeat.SweepResult, error) {
	if err := ctx.Err(); err != nil {
		return heartbeat.SweepResult{}, err
	}
	if req.Interval <= 0 || req.Limit <= 0 {
		return heartbeat.SweepResult{}, fmt.Errorf("sweep: interval %s and limit %d must be positive", req.Interval, req.Limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.now()
	if !req.Now.IsZero() {
		at = req.Now.UnixMicro()
	}
	st := &s.monitor
	var res heartbeat.SweepResult
	if st.lastSweep != 0 && req.BlindAfter > 0 && at-st.lastSweep > req.BlindAfter.Microseconds() {
		st.blindFrom, st.blindUntil = st.lastSweep, at
		res.Opened = &heartbeat.BlindWindow{From: time.UnixMicro(st.blindFrom).UTC(), Until: time.UnixMicro(st.blindUntil).UTC()}
	}
	st.lastSweep = max(st.lastSweep, at)
	res.Events = s.sweepLocked(at, req.Interval, req.Limit, st.blindUntil)
	return res, nil
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
			if srv.status != heartbeat.StatusDeregistered {
				out[t]++
			}
		}
	}
	return out, nil
}
