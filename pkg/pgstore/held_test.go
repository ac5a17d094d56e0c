package pgstore_test

import (
	"context"
	"errors"
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
	st := pgstore.New(db.App, pgstore.Options{Clock: clock})
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
