package pgstore

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// A tenant that the sweep did not have in its list when the list was first
// unread counts as failed since then, even when a read that ended in the
// background (a worker that hung, then thawed) already put it in the
// store's list; a tenant it had does not; one whose sweep failed keeps its
// first failure; those with no live server left are forgotten.
func TestUnsweptTenantsListMemory(t *testing.T) {
	t.Parallel()
	var u unsweptTenants
	t0 := time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC)
	known, failing, registered, gone := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	u.failed([]uuid.UUID{failing, gone}, t0.Add(-time.Second))
	u.unread(t0, []uuid.UUID{known, failing, gone})
	u.unread(t0.Add(5*time.Second), []uuid.UUID{known, failing, gone, registered}) // the background read's list
	u.failed([]uuid.UUID{failing}, t0.Add(10*time.Second))
	u.read([]uuid.UUID{known, failing, registered})

	got := u.longer([]uuid.UUID{known, failing, registered, gone}, t0.Add(time.Minute), 0)
	want := map[uuid.UUID]time.Time{failing: t0.Add(-time.Second), registered: t0}
	if len(got) != len(want) {
		t.Fatalf("failed since %v, want %v", got, want)
	}
	for tenant, since := range want {
		if !got[tenant].Equal(since) {
			t.Fatalf("tenant %s failed since %v, want %v (all: %v)", tenant, got[tenant], since, got)
		}
	}
	// A second read, with the list read all along, adds no one.
	u.swept([]uuid.UUID{failing, registered})
	u.read([]uuid.UUID{known, failing, registered, uuid.New()})
	if got := u.longer([]uuid.UUID{known, failing, registered}, t0.Add(time.Minute), 0); len(got) != 0 {
		t.Fatalf("after a read with the list read all along: %v, want none", got)
	}
}
