package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// A claim is a lease on the destination's cursor: a replica that dies
// holding it keeps the destination until the lease runs out, then another
// replica claims it; the dead one's late acknowledgement moves the cursor
// forward only and leaves the new lease alone.
func TestAlertLease(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(epoch)
	st := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(st.Close)
	tenant := uuid.New()
	for _, m := range []string{"alpha", "beta", "gamma"} {
		if _, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{
			ModuleName: m, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := st.Sweep(ctx, registry.SweepRequest{Now: epoch.Add(35 * time.Second), Interval: 10 * time.Second, Limit: 100}); err != nil || len(res.Events) != 3 {
		t.Fatalf("sweep: %d events, %v", len(res.Events), err)
	}

	dead, err := st.ClaimAlerts(ctx, "d", 2)
	if err != nil || dead == nil || len(dead.Events()) != 2 {
		t.Fatalf("first claim: %v, %v", dead, err)
	}
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
	next, err := st.ClaimAlerts(ctx, "d", 10)
	if err != nil || next == nil || len(next.Events()) != 3 {
		t.Fatalf("claim after the lease ran out: %v, %v; want all 3 events", next, err)
	}
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
	last, err := st.ClaimAlerts(ctx, "d", 10)
	if err != nil || last == nil || len(last.Events()) != 1 || last.Events()[0].EventID != next.Events()[2].EventID {
		t.Fatalf("claim after ack: %v, %v; want the third event", last, err)
	}
	last.Release(ctx)
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
	}); err != nil {
		t.Fatal(err)
	}
	if res, err := st.Sweep(ctx, registry.SweepRequest{Now: epoch.Add(35 * time.Second), Interval: 10 * time.Second, Limit: 100}); err != nil || len(res.Events) != 1 {
		t.Fatalf("sweep: %d events, %v", len(res.Events), err)
	}
	c, err := st.ClaimAlerts(ctx, "d", 10)
	if err != nil || c == nil || len(c.Events()) != 1 {
		t.Fatalf("claim beside another database's open transaction: %v, %v; want the unhealthy event", c, err)
	}
}
