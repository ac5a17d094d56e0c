package pgstore_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// A read that fails on the server (on Citus inside BEGIN ... COMMIT, as a
// read of a stopped worker's tenant does) leaves its session in the pool:
// on Citus a new session on the coordinator opens connections of its own
// to every worker, and a black-box run of a stopped worker saw mcpd
// replace 87 coordinator sessions in 37 s, each released inside the
// failed transaction.
func TestFailedReadKeepsItsSession(t *testing.T) {
	for _, engine := range []struct {
		name   string
		appURL func(t *testing.T) string
	}{
		{"postgres", func(t *testing.T) string { return pgtest.NewDB(t).AppURL }},
		{"citus", func(t *testing.T) string { return pgtest.SharedCitus(t).NewDB(t).AppURL }},
	} {
		t.Run(engine.name, func(t *testing.T) {
			ctx := t.Context()
			// One connection: a read that cost the store its session makes
			// the next statement start another backend.
			pool, err := pgstore.Connect(ctx, pgtest.WithQuery(t, engine.appURL(t), "pool_max_conns=1"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			store := pgstore.New(pool, pgstore.Options{CoordinatorReads: true})
			t.Cleanup(store.Close)
			tenant := uuid.New()
			if err := store.ReadInTenant(ctx, tenant, `SELECT 1`); err != nil {
				t.Fatal(err)
			}
			first := pgtest.BackendPID(t, pool)
			for range 3 {
				if err := store.ReadInTenant(ctx, tenant, `SELECT 1 / 0`); err == nil {
					t.Fatal("a read of 1 / 0 succeeded")
				}
				if pid := pgtest.BackendPID(t, pool); pid != first {
					t.Fatalf("after a failed read the store's session is backend %d, before it %d: the pool closed it", pid, first)
				}
			}
			if err := store.ReadInTenant(ctx, tenant, `SELECT 1`); err != nil {
				t.Fatalf("a read after the failed ones: %v", err)
			}
		})
	}
}
