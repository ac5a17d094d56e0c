package pgstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// The answers of two workers' claims merge in the claim's order: by the
// latest time of the tenant's events up to each (a tenant's times are not
// always in position order), then tenant, then position; cut at the
// limit, each tenant's events are still its first ones, so the ack
// skips none.
func TestMergeClaimed(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	a := uuid.MustParse("00000000-0000-0000-0000-00000000000a")
	b := uuid.MustParse("00000000-0000-0000-0000-00000000000b")
	c := uuid.MustParse("00000000-0000-0000-0000-00000000000c")
	ev := func(tenant uuid.UUID, pos int64, at int) registry.Event {
		return registry.Event{TenantID: tenant, Position: registry.Position{Seq: pos}, OccurredAt: t0.Add(time.Duration(at) * time.Second)}
	}
	// Worker 1: a's second event is stamped before its first.
	one := []registry.Event{ev(a, 1, 3), ev(a, 2, 1), ev(a, 3, 6)}
	// Worker 2: b and c.
	two := []registry.Event{ev(b, 1, 2), ev(c, 1, 4), ev(b, 2, 5)}
	name := func(events []registry.Event) []string {
		var out []string
		for _, e := range events {
			out = append(out, fmt.Sprintf("%c%d", "abc"[e.TenantID[15]-0xa], e.Position.Seq))
		}
		return out
	}
	for limit, want := range map[int][]string{
		6: {"b1", "a1", "a2", "c1", "b2", "a3"},
		3: {"b1", "a1", "a2"},
		0: nil,
	} {
		if got := name(mergeClaimed([][]registry.Event{one, two}, limit)); !slices.Equal(got, want) {
			t.Errorf("limit %d: %v, want %v", limit, got, want)
		}
	}
}
