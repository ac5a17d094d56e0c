package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// A flush of many tenants' held heartbeats in one call: on plain
// PostgreSQL one pipeline and one commit, on Citus a transaction per
// tenant; either way each share is written at its received times and
// names its own servers that were not simply healthy.
func TestHeldBatch(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { heldBatch(t, pgtest.NewDB(t)) })
	t.Run("citus", func(t *testing.T) { heldBatch(t, pgtest.SharedCitus(t).NewDB(t)) })
}

func heldBatch(t *testing.T, db *pgtest.DB) {
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(epoch)
	st := pgstore.New(db.App, pgstore.Options{Clock: clock, WorkerStall: patientStall})
	t.Cleanup(st.Close)
	reg := func(tenant uuid.UUID, module string) registry.Server { return register(t, st, tenant, module) }
	const tenants = 30
	var batch []store.TenantHeld
	var live []registry.Server
	gone := map[uuid.UUID]bool{}
	for i := range tenants {
		tenant := uuid.New()
		a, b := reg(tenant, "a"), reg(tenant, "b")
		live = append(live, a)
		if i%10 == 0 {
			if _, _, err := st.Deregister(ctx, tenant, b.ServerID); err != nil {
				t.Fatal(err)
			}
			gone[b.ServerID] = true
		}
		batch = append(batch, store.TenantHeld{Tenant: tenant, Beats: []store.HeldHeartbeat{
			{ServerID: a.ServerID, Age: time.Duration(i) * time.Millisecond},
			{ServerID: b.ServerID},
		}})
	}
	clock.Advance(3 * time.Second)
	results := st.WriteHeldBatch(ctx, batch)
	if len(results) != tenants {
		t.Fatalf("%d results, want %d", len(results), tenants)
	}
	for i, res := range results {
		if res.Err != nil {
			t.Fatalf("share %d: %v", i, res.Err)
		}
		wantGone := gone[batch[i].Beats[1].ServerID]
		if wantGone != (len(res.Outcomes) == 1) ||
			wantGone && (res.Outcomes[0].ServerID != batch[i].Beats[1].ServerID || !errors.Is(res.Outcomes[0].Err, registry.ErrDeregistered)) {
			t.Fatalf("share %d: outcomes %+v (deregistered server: %v)", i, res.Outcomes, wantGone)
		}
		srv, err := st.Server(ctx, batch[i].Tenant, live[i].ServerID)
		if err != nil {
			t.Fatal(err)
		}
		if want := clock.Now().Add(-time.Duration(i) * time.Millisecond); !srv.LastHeartbeatAt.Equal(want) {
			t.Fatalf("share %d: last heartbeat %s, want %s", i, srv.LastHeartbeatAt, want)
		}
	}
}

// A row that another transaction holds does not hold up the flush: its
// heartbeat comes back busy, to be written by the next flush, and the
// others of the call are written at once (on both engines).
func TestHeldSkipsHeldRows(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { heldSkipsHeldRows(t, pgtest.NewDB(t)) })
	t.Run("citus", func(t *testing.T) { heldSkipsHeldRows(t, pgtest.SharedCitus(t).NewDB(t)) })
}

func heldSkipsHeldRows(t *testing.T, db *pgtest.DB) {
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(epoch)
	st := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(st.Close)
	tenant := uuid.New()
	var ids []uuid.UUID
	for _, m := range []string{"locked", "free"} {
		srv, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: m, Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, srv.ServerID)
	}
	tx, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM mcp_servers WHERE tenant_id = $1 AND server_id = $2 FOR UPDATE`, tenant, ids[0]); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	res := st.WriteHeldBatch(wctx, []store.TenantHeld{{Tenant: tenant, Beats: []store.HeldHeartbeat{{ServerID: ids[0]}, {ServerID: ids[1]}}}})
	if res[0].Err != nil {
		t.Fatalf("flush with a row held elsewhere: %v (after %s)", res[0].Err, time.Since(start))
	}
	if len(res[0].Outcomes) != 1 || res[0].Outcomes[0].ServerID != ids[0] || !errors.Is(res[0].Outcomes[0].Err, store.ErrBusy) {
		t.Fatalf("outcomes %+v, want the held row busy", res[0].Outcomes)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Time{epoch, clock.Now()} {
		srv, err := st.Server(ctx, tenant, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if !srv.LastHeartbeatAt.Equal(want) {
			t.Fatalf("server %d: last heartbeat %s, want %s", i, srv.LastHeartbeatAt, want)
		}
	}
}

// On plain PostgreSQL a flush writes the healthy servers' heartbeats of
// every tenant in one statement, and then, each in a statement of its own,
// only the tenants with a heartbeat left: a server to recover, one
// deregistered, one that is not the tenant's. Each share's outcomes are
// those a statement per tenant gives.
func TestHeldFlushOfManyTenantsIsOneStatement(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(epoch)
	st, calls := tracedStore(t, db, pgstore.Options{Clock: clock})
	const tenants = 30
	var (
		batch []store.TenantHeld
		live  []registry.Server
	)
	for i := range tenants {
		tenant := uuid.New()
		live = append(live, register(t, st, tenant, "a"))
		batch = append(batch, store.TenantHeld{Tenant: tenant, Beats: []store.HeldHeartbeat{
			{ServerID: live[i].ServerID, Age: time.Duration(i) * time.Millisecond}}})
	}
	gone := register(t, st, batch[0].Tenant, "gone")
	if _, _, err := st.Deregister(ctx, batch[0].Tenant, gone.ServerID); err != nil {
		t.Fatal(err)
	}
	batch[0].Beats = append(batch[0].Beats, store.HeldHeartbeat{ServerID: gone.ServerID})
	down := register(t, st, batch[1].Tenant, "down")
	if _, err := db.Admin.Exec(ctx, `UPDATE mcp_servers SET status = 'degraded' WHERE tenant_id = $1 AND server_id = $2`,
		batch[1].Tenant, down.ServerID); err != nil {
		t.Fatal(err)
	}
	batch[1].Beats = append(batch[1].Beats, store.HeldHeartbeat{ServerID: down.ServerID})
	batch[2].Beats = append(batch[2].Beats, store.HeldHeartbeat{ServerID: live[3].ServerID})
	clock.Advance(3 * time.Second)
	calls.reset()
	res := st.WriteHeldBatch(ctx, batch)
	if groups, own := calls.count("mcp_heartbeat_held_group("), calls.tenants("mcp_heartbeat_held("); groups != 1 || len(own) != 3 ||
		!slices.Contains(own, batch[0].Tenant) || !slices.Contains(own, batch[1].Tenant) || !slices.Contains(own, batch[2].Tenant) {
		t.Fatalf("a flush of %d tenants: %d calls of mcp_heartbeat_held_group, mcp_heartbeat_held for %v; "+
			"want 1, and one each for the three tenants with a heartbeat left", tenants, groups, own)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("share %d: %v", i, r.Err)
		}
		switch i {
		case 0:
			if len(r.Outcomes) != 1 || r.Outcomes[0].ServerID != gone.ServerID || !errors.Is(r.Outcomes[0].Err, registry.ErrDeregistered) {
				t.Fatalf("the share with a deregistered server: outcomes %+v", r.Outcomes)
			}
		case 1:
			if len(r.Outcomes) != 1 || r.Outcomes[0].ServerID != down.ServerID || r.Outcomes[0].Err != nil ||
				r.Outcomes[0].Event == nil || r.Outcomes[0].Server.Status != registry.StatusHealthy {
				t.Fatalf("the share with a degraded server: outcomes %+v, want its recovery", r.Outcomes)
			}
		case 2:
			if len(r.Outcomes) != 1 || r.Outcomes[0].ServerID != live[3].ServerID || !errors.Is(r.Outcomes[0].Err, registry.ErrNotFound) {
				t.Fatalf("the share with another tenant's server: outcomes %+v", r.Outcomes)
			}
		default:
			if len(r.Outcomes) != 0 {
				t.Fatalf("share %d: outcomes %+v, want none", i, r.Outcomes)
			}
		}
		srv, err := st.Server(ctx, batch[i].Tenant, live[i].ServerID)
		if err != nil {
			t.Fatal(err)
		}
		if want := clock.Now().Add(-time.Duration(i) * time.Millisecond); !srv.LastHeartbeatAt.Equal(want) {
			t.Fatalf("share %d: last heartbeat %s, want %s", i, srv.LastHeartbeatAt, want)
		}
	}
	if srv, err := st.Server(ctx, batch[3].Tenant, live[3].ServerID); err != nil || !srv.LastHeartbeatAt.Equal(clock.Now().Add(-3*time.Millisecond)) {
		t.Fatalf("tenant 3's server after another tenant's heartbeat of it: %+v, %v", srv, err)
	}
}
