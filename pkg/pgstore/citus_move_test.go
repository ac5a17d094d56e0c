package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/schema"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// movedTenants are the tenants of TestCitusMoveOfAFleet: fixed, so that
// where their shards land is the same in every run (on both workers).
func movedTenants(n int) []uuid.UUID {
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "mcpd-citus-move-tenant-%d", i))
	}
	return out
}

// tenantTrail is what TestCitusMoveOfAFleet keeps of a tenant before the
// move: its position, its events in feed order and its servers' statuses.
type tenantTrail struct {
	horizon  registry.Position
	events   []registry.Event
	statuses map[uuid.UUID]registry.Status
}

// readFeedOf reads tenant's position, then every event of its feed.
func readFeedOf(ctx context.Context, st *pgstore.Store, tenant uuid.UUID) (registry.Position, []registry.Event, error) {
	h, err := st.Horizon(ctx, tenant)
	if err != nil {
		return h, nil, fmt.Errorf("horizon: %w", err)
	}
	batches, err := st.ReadFeed(ctx, []uuid.UUID{tenant}, []registry.Position{{}}, 1000)
	if err != nil || len(batches) != 1 {
		return h, nil, fmt.Errorf("feed: %d batches, %w", len(batches), err)
	}
	return h, batches[0].Events, nil
}

// readTrail reads tenant's position, every event of its feed and its
// servers' statuses.
func readTrail(ctx context.Context, t *testing.T, st *pgstore.Store, tenant uuid.UUID) tenantTrail {
	t.Helper()
	h, events, err := readFeedOf(ctx, st, tenant)
	if err != nil {
		t.Fatalf("tenant %s: %v", tenant, err)
	}
	page, err := st.Servers(ctx, tenant, registry.ServerFilter{Limit: 100})
	if err != nil {
		t.Fatalf("servers of %s: %v", tenant, err)
	}
	tr := tenantTrail{horizon: h, events: events, statuses: make(map[uuid.UUID]registry.Status)}
	for _, srv := range page.Servers {
		tr.statuses[srv.ServerID] = srv.Status
	}
	return tr
}

// TestCitusMoveOfAFleet rehearses docs/scaling.md's "Moving a running
// installation onto Citus" on a database that holds a fleet: migrated and
// written on plain PostgreSQL (the primary that becomes the coordinator),
// then the extension created and the workers added, then migrate up, which
// distributes the tables with their rows. A store opened afterwards (mcpd
// started again) finds every server in its status and every tenant's
// trail whole, at the same positions, and the trail goes on from there;
// the tenants' shards are on both workers.
func TestCitusMoveOfAFleet(t *testing.T) {
	c := pgtest.SharedCitus(t)
	db := c.NewPlainDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	engine := func() string {
		t.Helper()
		st, err := schema.Current(ctx, db.AdminURL)
		if err != nil {
			t.Fatal(err)
		}
		return st.Engine
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("migrate up before Citus: %v", err)
	}
	if got := engine(); got != schema.EnginePostgreSQL {
		t.Fatalf("engine before the move: %s, want %s", got, schema.EnginePostgreSQL)
	}

	// The fleet on plain PostgreSQL: per tenant, a server that was degraded
	// and recovered, one degraded, one deregistered.
	tenants := movedTenants(8)
	plain := pgstore.New(db.App, pgstore.Options{})
	servers := make(map[uuid.UUID][]uuid.UUID)
	for _, tenant := range tenants {
		for i := range 3 {
			srv, _, _, err := plain.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("module-%d", i),
				Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
				Skills: []registry.SkillInfo{{Name: "search"}, {Name: fmt.Sprintf("skill-%d", i)}}}, 0)
			if err != nil {
				t.Fatalf("register: %v", err)
			}
			servers[tenant] = append(servers[tenant], srv.ServerID)
		}
		if _, _, err := plain.Deregister(ctx, tenant, servers[tenant][2]); err != nil {
			t.Fatalf("deregister: %v", err)
		}
	}
	res, err := plain.Sweep(ctx, store.SweepRequest{Now: time.Now().Add(25 * time.Second), Interval: 10 * time.Second, Limit: 1000})
	if err != nil || len(res.Events) != 2*len(tenants) {
		t.Fatalf("sweep before the move: %d events, %v; want %d", len(res.Events), err, 2*len(tenants))
	}
	for _, tenant := range tenants {
		if _, ev, err := plain.Heartbeat(ctx, tenant, servers[tenant][0]); err != nil || ev == nil || ev.Kind != registry.KindRecovered {
			t.Fatalf("heartbeat of a degraded server: %v, %v", ev, err)
		}
	}
	before := make(map[uuid.UUID]tenantTrail)
	for _, tenant := range tenants {
		before[tenant] = readTrail(ctx, t, plain, tenant)
		if got := len(before[tenant].events); got != 7 || before[tenant].horizon.Seq != 7 {
			t.Fatalf("tenant %s before the move: %d events, position %d; want 7 and 7", tenant, got, before[tenant].horizon.Seq)
		}
	}
	// The key that seals the API's cursors: the same after the move, or
	// every cursor handed out before it would be refused.
	key, err := plain.CursorKey(ctx)
	if err != nil || len(key) == 0 {
		t.Fatalf("cursor key before the move: %x, %v", key, err)
	}
	plain.Close()
	db.App.Close()

	// The move: the extension and the workers, then migrate up.
	c.AddCitus(t, db)
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("migrate up after the extension: %v", err)
	}
	if got := engine(); got != schema.EngineCitus {
		t.Fatalf("engine after the move: %s, want %s", got, schema.EngineCitus)
	}
	var rows int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM mcp_servers`).Scan(&rows); err != nil || rows != 3*len(tenants) {
		t.Fatalf("servers after the move: %d, %v; want %d", rows, err, 3*len(tenants))
	}
	// The rows are in the shards alone: Citus leaves a copy on the
	// coordinator, unseen, unless told to drop it.
	for _, table := range []string{"mcp_servers", "mcp_skills", "mcp_audit_events", "mcp_tenant_feed", "mcp_tenant_servers"} {
		var size int64
		if err := db.Admin.QueryRow(ctx, `SELECT pg_relation_size($1::regclass)`, table).Scan(&size); err != nil || size != 0 {
			t.Errorf("%s: %d bytes of rows left on the coordinator (%v), want 0", table, size, err)
		}
	}

	// New sessions: those of before the move knew no extension.
	app, err := pgxpool.New(ctx, db.AppURL)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	moved := pgstore.New(app, pgstore.Options{})
	defer moved.Close()
	if !moved.TenantRouted(ctx) {
		t.Fatal("the store opened after the move does not see Citus")
	}
	if got, err := moved.CursorKey(ctx); err != nil || !bytes.Equal(got, key) {
		t.Errorf("cursor key after the move: %x (%v), before %x", got, err, key)
	}
	nodes := make(map[int64]bool)
	for _, tenant := range tenants {
		was, now := before[tenant], readTrail(ctx, t, moved, tenant)
		// Known once the tenant was read.
		nodes[moved.TenantNode(ctx, tenant)] = true
		if now.horizon.Seq != was.horizon.Seq {
			t.Errorf("tenant %s: position %d after the move, %d before", tenant, now.horizon.Seq, was.horizon.Seq)
		}
		if len(now.events) != len(was.events) {
			t.Fatalf("tenant %s: %d events after the move, %d before", tenant, len(now.events), len(was.events))
		}
		for i := range now.events {
			a, b := was.events[i], now.events[i]
			if a.EventID != b.EventID || a.Kind != b.Kind || a.ServerID != b.ServerID || a.Position.Seq != b.Position.Seq {
				t.Errorf("tenant %s: event %d was %s %s at %d, is %s %s at %d", tenant, i,
					a.Kind, a.EventID, a.Position.Seq, b.Kind, b.EventID, b.Position.Seq)
			}
		}
		if len(now.statuses) != len(was.statuses) {
			t.Errorf("tenant %s: %d servers after the move, %d before", tenant, len(now.statuses), len(was.statuses))
		}
		for id, status := range was.statuses {
			if now.statuses[id] != status {
				t.Errorf("tenant %s: server %s %s after the move, %s before", tenant, id, now.statuses[id], status)
			}
		}
		// A cursor handed out before the move: resumable when the
		// epoch is the same, else expired once (410), never an error.
		if _, err := moved.CheckPosition(ctx, tenant, was.horizon); err != nil && !errors.Is(err, registry.ErrPositionExpired) {
			t.Errorf("tenant %s: a cursor of before the move: %v", tenant, err)
		} else if tenant == tenants[0] {
			t.Logf("a cursor of before the move (epoch %d, now %d): %v", was.horizon.Epoch, now.horizon.Epoch, err)
		}
	}
	if len(nodes) != 2 || nodes[-1] {
		t.Fatalf("the tenants' nodes after the move: %v, want the two workers", nodes)
	}

	// Row-level security holds on the shards, for cyberos_app: a tenant's
	// session sees its own servers, a session of no tenant none.
	for _, who := range []uuid.UUID{tenants[0], uuid.Nil} {
		tx, err := app.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var seen int
		if who != uuid.Nil {
			_, err = tx.Exec(ctx, `SELECT mcp_set_tenant($1)`, who)
		}
		if err == nil {
			err = tx.QueryRow(ctx, `SELECT count(*) FROM mcp_servers`).Scan(&seen)
		}
		_ = tx.Rollback(ctx)
		if want := map[bool]int{true: 3, false: 0}[who != uuid.Nil]; err != nil || seen != want {
			t.Errorf("cyberos_app as tenant %s after the move: sees %d servers (%v), want %d", who, seen, err, want)
		}
	}

	// The trail goes on from the position it had.
	tenant := tenants[0]
	if _, ev, err := moved.Heartbeat(ctx, tenant, servers[tenant][1]); err != nil || ev == nil {
		t.Fatalf("recovery after the move: %v, %v", ev, err)
	}
	if _, _, _, err := moved.Register(ctx, tenant, registry.ServerInfo{ModuleName: "module-new", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, 0); err != nil {
		t.Fatalf("registration after the move: %v", err)
	}
	if _, ev, err := moved.Deregister(ctx, tenant, servers[tenant][0]); err != nil || ev == nil {
		t.Fatalf("deregistration after the move: %v, %v", ev, err)
	}
	was, now := before[tenant], readTrail(ctx, t, moved, tenant)
	if len(now.events) != 10 || now.horizon.Seq != 10 {
		t.Fatalf("tenant %s after three writes: %d events, position %d; want 10 and 10", tenant, len(now.events), now.horizon.Seq)
	}
	for i, kind := range []registry.EventKind{registry.KindRecovered, registry.KindRegistered, registry.KindDeregistered} {
		ev := now.events[len(was.events)+i]
		if ev.Kind != kind || ev.Position.Seq != was.horizon.Seq+int64(i)+1 {
			t.Errorf("event %d after the move: %s at %d, want %s at %d", i, ev.Kind, ev.Position.Seq, kind, was.horizon.Seq+int64(i)+1)
		}
	}

	// A run of migrate up that distributed the tables and stopped before
	// it made the functions again left them on the coordinator alone, and
	// in no metadata of Citus's: the next run makes them on the workers.
	var dropped int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE success) FROM run_command_on_workers(
		$$SET citus.enable_ddl_propagation TO off; DROP FUNCTION mcp_feed_read_each$$)`).Scan(&dropped); err != nil || dropped != 2 {
		t.Fatalf("the function dropped on %d workers (%v), want 2", dropped, err)
	}
	if _, err := db.Admin.Exec(ctx, `DELETE FROM pg_dist_object o USING pg_proc p
		WHERE o.classid = 'pg_proc'::regclass AND p.oid = o.objid AND p.proname LIKE 'mcp\_%'`); err != nil {
		t.Fatal(err)
	}
	read := func(st *pgstore.Store) error {
		_, _, err := readFeedOf(ctx, st, tenant)
		return err
	}
	half := pgstore.New(app, pgstore.Options{})
	defer half.Close()
	// The store's first reads go through the coordinator, until its
	// connections to the workers are made.
	var halfErr error
	testwait.Eventually(t, "a feed read made on a worker", func() bool {
		halfErr = read(half)
		return half.ReadsOnWorkers() > 0
	})
	if halfErr == nil {
		t.Fatal("a feed read without the function on the workers did not fail: the test no longer makes the half-moved state")
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
	healed := pgstore.New(app, pgstore.Options{})
	defer healed.Close()
	testwait.Eventually(t, "a feed read made on a worker", func() bool {
		if err := read(healed); err != nil {
			t.Fatalf("feed read after migrate up again: %v", err)
		}
		return healed.ReadsOnWorkers() > 0
	})
}
