package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// On a database that answers but cannot write (a standby, or here
// default_transaction_read_only), every write is registry.ErrUnavailable
// (503 with Retry-After, not 500), Ping says not ready, and reads still
// answer. Once the database may write again, so may the store, within
// seconds: its sessions opened while the database was read-only keep the
// setting, and a pool of mcpd's (Connect) replaces them.
func TestReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	readOnlyDatabase(t, pgtest.NewDB(t))
}

// The same on a Citus coordinator made read-only, whose workers are not:
// Citus hands registration, heartbeats and a tenant's sweep whole to a
// worker, which would write; the store refuses them itself.
func TestCitusReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	readOnlyDatabase(t, pgtest.SharedCitus(t).NewDB(t))
}

func readOnlyDatabase(t *testing.T, db *pgtest.DB) {
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(epoch)
	writable := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(writable.Close)
	tenant := uuid.New()
	info := registry.ServerInfo{ModuleName: "calendar", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}
	srv, _, _, err := writable.Register(ctx, tenant, info, 0)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := db.Admin.Exec(ctx, `ALTER DATABASE `+db.Name+` SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	pool, err := pgstore.Connect(ctx, db.AppURL) // new sessions: read-only
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := pgstore.New(pool, pgstore.Options{Clock: clock})
	t.Cleanup(st.Close)

	unavailable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, registry.ErrUnavailable) {
			t.Fatalf("%s on a read-only database: %v; want registry.ErrUnavailable", what, err)
		}
	}
	err = st.Ping(ctx)
	unavailable("Ping", err)
	if !errors.Is(err, pgstore.ErrReadOnly) {
		t.Fatalf("Ping: %v; want pgstore.ErrReadOnly", err)
	}
	_, _, _, err = st.Register(ctx, tenant, registry.ServerInfo{ModuleName: "mail", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0)
	unavailable("Register", err)
	_, _, err = st.Heartbeat(ctx, tenant, srv.ServerID)
	unavailable("Heartbeat", err)
	_, err = st.WriteHeldHeartbeats(ctx, tenant, []store.HeldHeartbeat{{ServerID: srv.ServerID}})
	unavailable("WriteHeldHeartbeats", err)
	for _, r := range st.WriteHeldBatch(ctx, []store.TenantHeld{{Tenant: tenant, Beats: []store.HeldHeartbeat{{ServerID: srv.ServerID}}}}) {
		unavailable("WriteHeldBatch", r.Err)
	}
	_, _, err = st.Deregister(ctx, tenant, srv.ServerID)
	unavailable("Deregister", err)
	_, err = st.Sweep(ctx, store.SweepRequest{Now: epoch.Add(time.Hour), Interval: 10 * time.Second, Limit: 100})
	unavailable("Sweep", err)
	_, err = st.ClaimAlerts(ctx, "d", 10)
	unavailable("ClaimAlerts", err)

	if got, err := st.Server(ctx, tenant, srv.ServerID); err != nil || got.Status != registry.StatusHealthy {
		t.Fatalf("read on a read-only database: %+v, %v", got, err)
	}
	if err := writable.Ping(ctx); err != nil {
		t.Fatalf("Ping on the sessions opened before: %v", err)
	}

	// Several sessions in the pool, each read-only, then the database
	// writable again.
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.Ping(ctx); !errors.Is(err, pgstore.ErrReadOnly) {
				t.Errorf("Ping on a read-only database: %v; want pgstore.ErrReadOnly", err)
			}
		}()
	}
	wg.Wait()
	if _, err := db.Admin.Exec(ctx, `ALTER DATABASE `+db.Name+` RESET default_transaction_read_only`); err != nil {
		t.Fatal(err)
	}
	modules := 0
	register := func() error {
		modules++
		_, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("again-%d", modules),
			Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0)
		return err
	}
	testwait.Poll(t, "Ping after the database is writable again", 15*time.Second, func() error {
		return st.Ping(ctx)
	})
	testwait.Poll(t, "a registration after the database is writable again", 15*time.Second, register)
	// Once it writes, every session it hands out writes.
	for i := range 20 {
		if err := st.Ping(ctx); err != nil {
			t.Fatalf("Ping %d after the first write: %v", i, err)
		}
		if err := register(); err != nil {
			t.Fatalf("registration %d after the first write: %v", i, err)
		}
	}
}

// A primary that cannot commit (its synchronous standby is gone) answers
// reads, but Ping fails within the caller's deadline: /readyz is 503.
func TestPingWhenCommitsWait(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCluster(t)
	db := c.NewDB(t)
	ctx := t.Context()
	st := pgstore.New(db.App, pgstore.Options{})
	t.Cleanup(st.Close)
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	for _, q := range []string{
		`ALTER SYSTEM SET synchronous_standby_names = 'gone'`,
		`SELECT pg_reload_conf()`,
		`ALTER DATABASE ` + db.Name + ` SET synchronous_commit = on`,
	} {
		if _, err := db.Admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pgxpool.New(ctx, db.AppURL) // new sessions: synchronous_commit on
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	waiting := pgstore.New(pool, pgstore.Options{})
	t.Cleanup(waiting.Close)
	// The server applies the reload in the background: within a few
	// seconds commits start waiting.
	testwait.Until(t, "Ping unavailable while commits wait for a standby that is gone", 10*time.Second, func() bool {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := waiting.Ping(pctx)
		cancel()
		if err != nil && !errors.Is(err, registry.ErrUnavailable) {
			t.Fatalf("Ping while commits wait for a standby that is gone: %v; want registry.ErrUnavailable", err)
		}
		return err != nil
	})
	if _, err := waiting.Servers(ctx, uuid.New(), registry.ServerFilter{Limit: 10}); err != nil {
		t.Fatalf("a read while commits wait: %v", err)
	}
	// Commits go through again once no standby is waited for.
	for _, q := range []string{`ALTER SYSTEM RESET synchronous_standby_names`, `SELECT pg_reload_conf()`} {
		if _, err := db.Admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Poll(t, "Ping after the standby requirement was lifted", 10*time.Second, func() error {
		return waiting.Ping(ctx)
	})
}

// A coordinator made read-only by a reload (ALTER SYSTEM, pg_reload_conf)
// refuses the very next delegated call of a session that was open before:
// the backend takes the setting when it reads that statement, and
// reports it only after, so the store asks first. Not one registration
// is written after the reload.
func TestCitusReadOnlyAfterReload(t *testing.T) {
	t.Parallel()
	db := pgtest.NewCitus(t).NewDB(t)
	ctx := t.Context()
	st := pgstore.New(db.App, pgstore.Options{Clock: clockwork.NewFakeClockAt(epoch)})
	t.Cleanup(st.Close)
	tenant := uuid.New()
	register := func(module string) error {
		_, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: module, Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}}, 0)
		return err
	}
	// Sessions of the app pool, open and idle before the reload; and the
	// store's pool to the tenant's worker, where its registrations are
	// made once it is open.
	before := 0
	testwait.Until(t, "four registrations, the last made on the tenant's worker", 30*time.Second, func() bool {
		calls := st.CallsOnWorkers()
		if err := register(fmt.Sprintf("before-%d", before)); err != nil {
			t.Fatal(err)
		}
		before++
		return before >= 4 && st.CallsOnWorkers() > calls
	})
	for _, q := range []string{`ALTER SYSTEM SET default_transaction_read_only = on`, `SELECT pg_reload_conf()`} {
		if _, err := db.Admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), db.AdminURL+"&options=-c%20default_transaction_read_only%3Doff")
		if err != nil {
			t.Errorf("reset: %v", err)
			return
		}
		defer conn.Close(context.Background())
		for _, q := range []string{`ALTER SYSTEM RESET default_transaction_read_only`, `SELECT pg_reload_conf()`} {
			if _, err := conn.Exec(context.Background(), q); err != nil {
				t.Errorf("reset: %v", err)
			}
		}
	})
	// The postmaster has signalled every backend once a backend it starts
	// has the setting: it starts none while it reloads. (One of the admin
	// pool's open sessions could have its signal before an app session
	// has its own.)
	testwait.Until(t, "the reload reached the backends", 10*time.Second, func() bool {
		conn, err := pgx.Connect(ctx, db.AdminURL)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var on string
		return conn.QueryRow(ctx, `SHOW default_transaction_read_only`).Scan(&on) == nil && on == "on"
	})
	for i := range 8 {
		if err := register(fmt.Sprintf("after-%d", i)); !errors.Is(err, registry.ErrUnavailable) {
			t.Fatalf("registration %d after the reload: %v; want registry.ErrUnavailable", i, err)
		}
	}
	var n int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM mcp_servers WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != before {
		t.Fatalf("%d servers of the tenant after the reload, want the %d registered before", n, before)
	}
}
