package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// The store keeps each tenant's count of live servers (0018: no trigger)
// through registration, the sweep's status changes, deregistration and
// registration again; and each server's status_changed_at at its latest
// event's time.
func TestTenantLiveCountKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	clock := clockwork.NewFakeClockAt(epoch)
	st := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(st.Close)
	a, b := uuid.New(), uuid.New()
	reg := func(tenant uuid.UUID, module string) registry.Server { return register(t, st, tenant, module) }
	check := func(what string, tenant uuid.UUID, want int) {
		t.Helper()
		var kept, actual int
		if err := db.Admin.QueryRow(ctx, `SELECT COALESCE((SELECT live FROM mcp_tenant_servers WHERE tenant_id = $1), 0),
			(SELECT count(*) FROM mcp_servers WHERE tenant_id = $1 AND status <> 'deregistered')`, tenant).Scan(&kept, &actual); err != nil {
			t.Fatal(err)
		}
		if kept != want || actual != want {
			t.Fatalf("%s: kept %d, actual %d, want %d", what, kept, actual, want)
		}
	}
	changedAt := func(id uuid.UUID) time.Time {
		t.Helper()
		var at time.Time
		if err := db.Admin.QueryRow(ctx, `SELECT status_changed_at FROM mcp_servers WHERE server_id = $1`, id).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at.UTC()
	}
	one, two := reg(a, "one"), reg(a, "two")
	reg(a, "three")
	reg(b, "one")
	check("after three registrations", a, 3)
	check("the other tenant", b, 1)
	if got := changedAt(one.ServerID); !got.Equal(epoch) {
		t.Fatalf("status_changed_at after registration: %v, want %v", got, epoch)
	}
	clock.Advance(time.Minute)
	if _, err := st.Sweep(ctx, store.SweepRequest{Interval: 10 * time.Second, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	check("unhealthy still counts", a, 3)
	if got := changedAt(one.ServerID); !got.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("status_changed_at after the sweep: %v, want %v", got, epoch.Add(time.Minute))
	}
	for _, id := range []uuid.UUID{one.ServerID, two.ServerID, two.ServerID} {
		if _, _, err := st.Deregister(ctx, a, id); err != nil {
			t.Fatal(err)
		}
	}
	check("after two deregistrations (one twice)", a, 1)
	clock.Advance(time.Minute)
	reg(a, "one")
	check("registered again", a, 2)
	if got := changedAt(one.ServerID); !got.Equal(epoch.Add(2 * time.Minute)) {
		t.Fatalf("status_changed_at after registering again: %v", got)
	}
	if _, _, err := st.Heartbeat(ctx, a, one.ServerID); err != nil {
		t.Fatal(err)
	}
	if got := changedAt(one.ServerID); !got.Equal(epoch.Add(2 * time.Minute)) {
		t.Fatalf("status_changed_at after a heartbeat of a healthy server: %v", got)
	}
	check("the other tenant untouched", b, 1)
}
