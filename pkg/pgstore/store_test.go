package pgstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/storetest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var epoch = time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(t, pgtest.NewDB(t)) })
}

// harness is the conformance suite's store on db, through the app role.
func harness(t *testing.T, db *pgtest.DB) storetest.Harness {
	t.Helper()
	return harnessOn(t, db, db.App)
}

// patientStall is the worker stall (Options.WorkerStall) of the stores of
// tests that are not about a worker that hangs: on a loaded machine a
// Citus worker's call may take longer than the default 2 s, which would
// answer ErrWorkerStalled for its share of a call that serves several
// workers.
const patientStall = testwait.Cap

// harnessOn is harness with the store on pool, a pool of db's app role
// (through a pooler, say).
func harnessOn(t *testing.T, db *pgtest.DB, pool *pgxpool.Pool) storetest.Harness {
	t.Helper()
	{
		clock := clockwork.NewFakeClockAt(epoch)
		st := pgstore.New(pool, pgstore.Options{Clock: clock, WorkerStall: patientStall})
		t.Cleanup(st.Close)
		return storetest.Harness{
			Store: st,
			Clock: clock,
			DisableSkill: func(ctx context.Context, tenant, serverID uuid.UUID, name, reason string) error {
				// What the upstream skill registry does, through the app role.
				tx, err := db.App.Begin(ctx)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
				if _, err := tx.Exec(ctx, `SELECT mcp_set_tenant($1)`, tenant); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE mcp_skills SET available = false, unavailable_reason = $3
					WHERE server_id = $1 AND name = $2`, serverID, name, reason); err != nil {
					return err
				}
				return tx.Commit(ctx)
			},
		}
	}
}

// register registers tenant's module (version 1.0.0, one protocol, no
// skills) and returns the server, failing t on an error.
// holdRows locks the rows that query (a SELECT ... FOR UPDATE, its
// arguments args) reads, in a transaction of the database's superuser
// that lasts until the test ends or the returned release is called.
func holdRows(t *testing.T, db *pgtest.DB, query string, args ...any) (release func() error) {
	t.Helper()
	tx, err := db.Admin.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	release = func() error { return tx.Rollback(context.WithoutCancel(t.Context())) }
	t.Cleanup(func() { _ = release() })
	if _, err := tx.Exec(t.Context(), query, args...); err != nil {
		t.Fatal(err)
	}
	return release
}

func register(t *testing.T, st *pgstore.Store, tenant uuid.UUID, module string) registry.Server {
	t.Helper()
	srv, _, _, err := st.Register(t.Context(), tenant, registry.ServerInfo{ModuleName: module, Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}
