package simulate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
)

// The API does not tell its monitor period; verification assumes half the
// interval, mcpd's default ratio (10s and 5s). Near a boundary of the
// statuses (2 and 3 intervals of silence) a window of one interval plus that
// period is tolerated: from half an interval before the boundary (latency,
// timers) to one interval after it (the monitor's next sweep, and more).
const (
	earlySlackIntervals = 0.5
	lateSlackIntervals  = 1.0
)

// liveLevels orders the statuses of a live server by silence.
var liveLevels = []registry.Status{registry.StatusHealthy, registry.StatusDegraded, registry.StatusUnhealthy}

func level(s registry.Status) int {
	for i, l := range liveLevels {
		if l == s {
			return i
		}
	}
	return -1
}

// expect is the statuses that server s may have at some time between
// readStart and readEnd (the request and the answer of the list read):
// one, or the neighbours of a boundary; none when there is no expectation.
func (r *runner) expect(s *sim, readStart, readEnd time.Duration) []registry.Status {
	if s.gone.Load() {
		if s.deregOK.Load() {
			return []registry.Status{registry.StatusDeregistered}
		}
		return nil
	}
	last := time.Duration(s.lastOK.Load())
	early := time.Duration(earlySlackIntervals * float64(r.interval))
	late := time.Duration(lateSlackIntervals * float64(r.interval))
	lo := level(registry.Classify(readStart-last-late, r.interval))
	hi := level(registry.Classify(readEnd-last+early, r.interval))
	return slices.Clone(liveLevels[lo : hi+1])
}

// verify lists the tenant's servers and compares each simulated one with
// what the run implies at the time of the list: anywhere from its request
// to its answer, which a loaded machine or a long list keeps apart.
func (r *runner) verify(ctx context.Context) (*VerifyResult, error) {
	readStart := r.since()
	servers, err := r.c.AllServers(ctx, client.ListServersParams{Limit: registry.MaxPageLimit})
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	readEnd := r.since()
	byID := make(map[uuid.UUID]registry.Server, len(servers))
	for _, srv := range servers {
		byID[srv.ServerID] = srv
	}
	v := &VerifyResult{Mismatches: []Mismatch{}}
	for _, s := range r.sims {
		want := r.expect(s, readStart, readEnd)
		if len(want) == 0 {
			v.Skipped++
			continue
		}
		v.Checked++
		if len(want) > 1 {
			v.Tolerated++
		}
		got := "missing"
		srv, ok := byID[s.id]
		if ok {
			got = string(srv.Status)
			if slices.Contains(want, srv.Status) {
				continue
			}
		}
		v.Mismatches = append(v.Mismatches, Mismatch{Index: s.index, ModuleName: moduleName(r.opts.Prefix, s.index),
			ServerID: s.id.String(), Want: want, Got: got})
	}
	return v, nil
}
