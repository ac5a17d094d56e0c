package pgstore_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// A write that gives up waiting for a lock (lock_timeout, set here for the
// store's sessions, as an operator may in the database URL) is
// registry.ErrUnavailable, 503 with Retry-After, not 500: the database
// could not serve it now, and nothing of it was written.
func TestLockWaitGivenUpIsUnavailable(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(db.AppURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "100ms"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := pgstore.New(pool, pgstore.Options{})
	t.Cleanup(st.Close)
	tenant := uuid.New()
	info := registry.ServerInfo{ModuleName: "calendar", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}
	srv, _, _, err := st.Register(ctx, tenant, info, 0)
	if err != nil {
		t.Fatal(err)
	}

	// Another transaction holds the tenant's feed position, which every
	// write of the tenant takes.
	release := holdRows(t, db, `SELECT 1 FROM mcp_tenant_feed WHERE tenant_id = $1 FOR UPDATE`, tenant)

	unavailable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, registry.ErrUnavailable) {
			t.Fatalf("%s past lock_timeout: %v; want registry.ErrUnavailable", what, err)
		}
	}
	mail := registry.ServerInfo{ModuleName: "mail", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}
	_, _, _, err = st.Register(ctx, tenant, mail, 0)
	unavailable("Register", err)
	_, _, err = st.Deregister(ctx, tenant, srv.ServerID)
	unavailable("Deregister", err)

	if err := release(); err != nil {
		t.Fatal(err)
	}
	servers, err := st.Servers(ctx, tenant, registry.ServerFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(servers.Servers) != 1 || servers.Servers[0].ServerID != srv.ServerID {
		t.Fatalf("after the refused writes: %+v; want only %s", servers.Servers, srv.ServerID)
	}
}
