package tui

import (
	"context"
	"testing"

	"github.com/google/uuid"
)

// availSource is the fake with the ratios of the last 24 hours.
type availSource struct {
	*fakeSource
	ratios map[uuid.UUID]*float64
}

func (s availSource) List(ctx context.Context) (Snapshot, error) {
	snap, err := s.fakeSource.List(ctx)
	snap.Availability = s.ratios
	return snap, err
}

// TestAvailabilityColumn: with the ratios of the list, each row shows its
// server's share of the last 24 hours as mcpctl does ("-": none observed);
// without them there is no column.
func TestAvailabilityColumn(t *testing.T) {
	t.Parallel()
	fake := newFake()
	cal, mail := 0.99931, 1.0
	src := availSource{fake, map[uuid.UUID]*float64{
		fake.servers[1].ServerID: &cal, // calendar
		fake.servers[3].ServerID: &mail,
	}}
	b := newBoard(t, src).load()
	b.contains(
		"  MODULE        VERSION     STATUS        AVAIL 24H  LAST HEARTBEAT  CHANGED     PROTOCOLS",
		"> calendar      1.3.2       healthy       99.931%    5s ago          -",
		"  mail          2.0.0       degraded      100.000%   32s ago         -",
		"  search        0.9.1       unhealthy     -          1m00s ago       -",
	)
	b = newBoard(t, fake).load()
	b.lacks("AVAIL 24H", "99.931%")
}
