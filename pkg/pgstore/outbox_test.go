package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// A claim is a lease on the destination's cursor: a replica that dies
// holding it keeps the destination until the lease runs out, then another
// replica claims it; the dead one's late acknowledgement moves the cursor
// forward only and leaves the new lease alone.
func TestAlertLease(t *testing.T) {
	t.Parallel()
	alertLease(t, pgtest.NewDB(t))
}

// The alert outbox on Citus: the claim, the acknowledgement and the count
// of pending alerts read each tenant's positions on its shard; the
// unhealthy servers' lookup of their events names tenant_id (Citus
// refused the join otherwise: shared/citus/README.md).
func TestCitusAlertLease(t *testing.T) {
	db := pgtest.SharedCitus(t).NewDB(t)
	alertLease(t, db)
	st := pgstore.New(db.App, pgstore.Options{})
	t.Cleanup(st.Close)
	if un, err := st.UnhealthyServers(t.Context()); err != nil || len(un) != 3 {
		t.Fatalf("unhealthy servers: %d, %v; want 3", len(un), err)
	}
	if _, err := st.LiveCounts(t.Context(), []uuid.UUID{uuid.New()}); err != nil {
		t.Fatalf("live counts: %v", err)
	}
	if _, err := st.CountByStatus(t.Context()); err != nil {
		t.Fatalf("count by status: %v", err)
	}
}

func alertLease(t *testing.T, db *pgtest.DB) {
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(epoch)
	st := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(st.Close)
	tenant := uuid.New()
	for _, m := range []string{"alpha", "beta", "gamma"} {
		if _, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{
			ModuleName: m, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
		}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := st.Sweep(ctx, store.SweepRequest{Now: epoch.Add(35 * time.Second), Interval: 10 * time.Second, Limit: 100}); err != nil || len(res.Events) != 3 {
		t.Fatalf("sweep: %d events, %v", len(res.Events), err)
	}

	dead := claimEvents(t, st, "d", 2, 2)
	// Its replica dies: no Ack, no Release.
	if c, err := st.ClaimAlerts(ctx, "d", 10); err != nil || c != nil {
		t.Fatalf("claim while leased: %v, %v; want nil, nil", c, err)
	}
	var until time.Time
	if err := db.Admin.QueryRow(ctx, `SELECT claimed_until FROM mcp_alert_cursors WHERE destination = 'd'`).Scan(&until); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(until); left < pgstore.AlertLease-5*time.Second || left > pgstore.AlertLease {
		t.Fatalf("lease runs %v more, want about %v", left, pgstore.AlertLease)
	}
	// The lease runs out.
	if _, err := db.Admin.Exec(ctx, `UPDATE mcp_alert_cursors SET claimed_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	next := claimEvents(t, st, "d", 10, 3)
	// The dead replica acknowledges late: the cursor moves past its two
	// events, the new lease stays.
	if err := dead.Ack(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if c, err := st.ClaimAlerts(ctx, "d", 10); err != nil || c != nil {
		t.Fatalf("claim while the new lease holds: %v, %v; want nil, nil", c, err)
	}
	if n, _, err := st.PendingAlerts(ctx, "d"); err != nil || n != 1 {
		t.Fatalf("pending %d, %v; want 1", n, err)
	}
	// The new holder acknowledges one event, behind the cursor: it stays,
	// and the lease is given up.
	if err := next.Ack(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if last := claimEvents(t, st, "d", 10, 1); last.Events()[0].EventID != next.Events()[2].EventID {
		t.Fatalf("claim after ack: %v; want the third event", last.Events())
	} else {
		last.Release(ctx)
	}
	if c, err := st.ClaimAlerts(ctx, "d", 10); err != nil || c == nil {
		t.Fatalf("claim after release: %v, %v", c, err)
	}
}

// An open transaction in another database of the same cluster (a report,
// a migration, the rollback tier of these tests) does not hold the alert
// outbox back: the claim waits only for this database's transactions, as
// the change feed does (migration 0016).
func TestAlertClaimIgnoresOtherDatabases(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	other := pgtest.NewDB(t)
	ctx := t.Context()
	long, err := other.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = long.Rollback(context.WithoutCancel(ctx)) })
	// A transaction id, older than every event below.
	if _, err := long.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClockAt(epoch)
	st := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(st.Close)
	tenant := uuid.New()
	if _, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{
		ModuleName: "alpha", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
	}, 0); err != nil {
		t.Fatal(err)
	}
	if res, err := st.Sweep(ctx, store.SweepRequest{Now: epoch.Add(35 * time.Second), Interval: 10 * time.Second, Limit: 100}); err != nil || len(res.Events) != 1 {
		t.Fatalf("sweep: %d events, %v", len(res.Events), err)
	}
	// The open transaction holds the claim back on every try, not once.
	claimEvents(t, st, "d", 10, 1)
}

// claimEvents claims destination's alerts until a claim holds want events,
// giving each other claim back, and returns it; a claim of no lease, or an
// error, fails t. A claim reads up to the feed's horizon, which a
// transaction of another database that ends during the read holds back for
// that read (mcp_feed_horizon cannot tell it from one of its own): the
// dispatcher's next poll, like the next try here, moves on.
func claimEvents(t *testing.T, st *pgstore.Store, destination string, limit, want int) store.AlertClaim {
	t.Helper()
	var c store.AlertClaim
	testwait.Eventually(t, fmt.Sprintf("a claim of %d events", want), func() bool {
		var err error
		if c, err = st.ClaimAlerts(t.Context(), destination, limit); err != nil || c == nil {
			t.Fatalf("claim: %v, %v", c, err)
		}
		if len(c.Events()) == want {
			return true
		}
		c.Release(t.Context())
		return false
	})
	return c
}

// The skill outage alerts' state on Citus: recorded, read per key and
// listed as firing for two tenants (two shards' rows in one call).
func TestCitusSkillAlerts(t *testing.T) {
	db := pgtest.SharedCitus(t).NewDB(t)
	ctx := t.Context()
	st := pgstore.New(db.App, pgstore.Options{})
	t.Cleanup(st.Close)
	a, b := uuid.New(), uuid.New()
	if _, _, _, err := st.Register(ctx, a, registry.ServerInfo{ModuleName: "alpha", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "search"}}}, 0); err != nil {
		t.Fatal(err)
	}
	since := epoch
	raised := []store.SkillAlertState{
		{SkillKey: store.SkillKey{TenantID: a, Skill: "search"}, FiringSince: since},
		{SkillKey: store.SkillKey{TenantID: b, Skill: "mail"}, FiringSince: since},
	}
	if err := st.RecordSkillAlerts(ctx, "d", raised, nil); err != nil {
		t.Fatalf("record: %v", err)
	}
	states, err := st.SkillAlertStates(ctx, "d", []store.SkillKey{raised[0].SkillKey, raised[1].SkillKey})
	if err != nil || len(states) != 2 || !states[0].Available || states[1].Available || !states[1].FiringSince.Equal(since) {
		t.Fatalf("states: %+v, %v", states, err)
	}
	firing, err := st.FiringSkillAlerts(ctx, "d")
	if err != nil || len(firing) != 2 {
		t.Fatalf("firing: %+v, %v", firing, err)
	}
	if err := st.RecordSkillAlerts(ctx, "d", nil, []store.SkillKey{raised[1].SkillKey}); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if firing, err := st.FiringSkillAlerts(ctx, "d"); err != nil || len(firing) != 1 {
		t.Fatalf("firing after resolving one: %+v, %v", firing, err)
	}
}
