package pgstore_test

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// On Citus a tenant's position and trail are read on the tenant's own
// worker once the store has a connection there (workerreads.go): the
// worker shows the store's own sessions, not only the coordinator's. Each
// read sees every write answered before it, made through the coordinator
// by another store (another replica): the position moves by one per
// event, and the trail after the old position is that event.
func TestCitusReadsOnTheTenantsWorker(t *testing.T) {
	c, db, reader, writer := storesOnAndOffTheWorkers(t)
	ctx := t.Context()
	appURL, err := url.Parse(db.AppURL)
	if err != nil {
		t.Fatal(err)
	}
	tenants := c.TenantOnEachWorker(t, db)
	for i, tenant := range tenants {
		worker, err := pgx.Connect(ctx, c.Workers[i].URL("", db.Name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = worker.Close(ctx) })
		// The store's own sessions on the worker: the coordinator's carry
		// Citus's application name.
		own := func() int {
			var n int
			if err := worker.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = $1 AND usename = $2 AND application_name NOT LIKE 'citus%'`,
				db.Name, appURL.User.Username()).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := own(); n != 0 {
			t.Fatalf("worker %d has %d sessions of the store before any read", i, n)
		}
		testwait.Until(t, "the store reads on the tenant's worker", 30*time.Second, func() bool {
			made := reader.ReadsOnWorkers()
			if _, err := reader.Horizon(ctx, tenant); err != nil {
				t.Fatal(err)
			}
			return reader.ReadsOnWorkers() > made
		})
		if own() == 0 {
			t.Fatalf("worker %d shows no session of the store", i)
		}
		made := reader.ReadsOnWorkers()
		for round := range 10 {
			before, err := reader.Horizon(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			_, _, ev, err := writer.Register(ctx, tenant, registry.ServerInfo{ModuleName: "m" + string(rune('a'+round)),
				Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			after, err := reader.Horizon(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if after.Epoch != before.Epoch || after.Seq != before.Seq+1 {
				t.Fatalf("worker %d, round %d: the position read after a registration was answered is %v, want one past %v",
					i, round, after, before)
			}
			batches, err := reader.ReadFeed(ctx, tenants[i:i+1], []registry.Position{before}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(batches) != 1 || len(batches[0].Events) != 1 || batches[0].Events[0].EventID != ev.EventID || batches[0].Horizon != after {
				t.Fatalf("worker %d, round %d: the trail after %v is %+v, want the registration %s up to %v",
					i, round, before, batches, ev.EventID, after)
			}
		}
		if n := reader.ReadsOnWorkers() - made; n != 30 {
			t.Fatalf("worker %d: %d of the 30 reads made on the worker, want all", i, n)
		}
	}
}

// Horizons reads the positions of several tenants in one call, each as
// Horizon reads it, on plain PostgreSQL and on Citus with tenants of both
// workers, there on the workers themselves: tenant i has i events, and
// its position is past them, in the epoch of Horizon's.
func TestHorizonsReadEachTenant(t *testing.T) {
	for _, tc := range []struct {
		name  string
		citus bool
	}{{"postgres", false}, {"citus", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			var (
				db      *pgtest.DB
				tenants []uuid.UUID
			)
			if tc.citus {
				c := pgtest.SharedCitus(t)
				db = c.NewDB(t)
				// The workers' tenants interleaved: answers come back per
				// worker, and each must reach its own tenant.
				on0, on1 := c.TenantsOnWorker(t, db, 0, 3), c.TenantsOnWorker(t, db, 1, 3)
				tenants = []uuid.UUID{on0[0], on1[0], on0[1], on1[1], on0[2], on1[2]}
			} else {
				db = pgtest.Shared(t).NewDB(t)
				for range 6 {
					tenants = append(tenants, uuid.New())
				}
			}
			st := pgstore.New(db.App, pgstore.Options{WorkerStall: patientStall})
			t.Cleanup(st.Close)
			for i, tenant := range tenants {
				for j := range i {
					register(t, st, tenant, fmt.Sprintf("m%d", j))
				}
			}
			if tc.citus {
				testwait.Until(t, "the store reads on both workers", 30*time.Second, func() bool {
					made := st.ReadsOnWorkers()
					st.Horizons(ctx, tenants)
					return st.ReadsOnWorkers() == made+2
				})
			}
			made := st.ReadsOnWorkers()
			got, errs := st.Horizons(ctx, tenants)
			if tc.citus && st.ReadsOnWorkers() != made+2 {
				t.Fatalf("%d reads on the workers for the tenants of two, want one each", st.ReadsOnWorkers()-made)
			}
			var seqs []int64
			for i, tenant := range tenants {
				want, err := st.Horizon(ctx, tenant)
				if err != nil {
					t.Fatal(err)
				}
				if errs[i] != nil || got[i] != want {
					t.Fatalf("tenant %d: Horizons gave %v, %v; Horizon %v", i, got[i], errs[i], want)
				}
				seqs = append(seqs, got[i].Seq)
			}
			if want := []int64{0, 1, 2, 3, 4, 5}; !slices.Equal(seqs, want) {
				t.Fatalf("the tenants' positions %v, want %v (each past its own events)", seqs, want)
			}
			// Every position has the epoch of the database mcpd connects
			// to (on Citus the coordinator's, though read on the workers),
			// and one tenant's read, a statement of its own, agrees.
			var epoch int64
			if err := db.App.QueryRow(ctx, `SELECT mcp_feed_epoch()`).Scan(&epoch); err != nil {
				t.Fatal(err)
			}
			for i, p := range got {
				if p.Epoch != uint64(epoch) {
					t.Fatalf("tenant %d: epoch %d, want the database's %d", i, p.Epoch, epoch)
				}
				made := st.ReadsOnWorkers()
				one, errs := st.Horizons(ctx, tenants[i:i+1])
				if errs[0] != nil || one[0] != p {
					t.Fatalf("tenant %d read alone: %v, %v; want %v", i, one[0], errs[0], p)
				}
				if tc.citus && st.ReadsOnWorkers() != made+1 {
					t.Fatalf("tenant %d read alone: %d reads on its worker, want 1", i, st.ReadsOnWorkers()-made)
				}
			}
			// NodeHorizons, of one worker's tenants (on plain PostgreSQL
			// of any), agrees, in one read on the worker.
			for _, own := range [][]int{{0, 2, 4}, {1, 3, 5}} {
				var these []uuid.UUID
				for _, i := range own {
					these = append(these, tenants[i])
				}
				made := st.ReadsOnWorkers()
				read, errs := st.NodeHorizons(ctx, st.TenantNode(ctx, these[0]), these)
				for j, i := range own {
					if errs[j] != nil || read[j] != got[i] {
						t.Fatalf("NodeHorizons: tenant %d %v, %v; want %v", i, read[j], errs[j], got[i])
					}
				}
				if tc.citus && st.ReadsOnWorkers() != made+1 {
					t.Fatalf("NodeHorizons of a worker's tenants: %d reads on the workers, want 1", st.ReadsOnWorkers()-made)
				}
			}
		})
	}
}

// storesOnAndOffTheWorkers returns a database of the shared Citus cluster
// and two stores on it: one that reads and calls on the workers when it
// can (the default), and one whose reads and calls all go through the
// coordinator.
func storesOnAndOffTheWorkers(t *testing.T) (*pgtest.Citus, *pgtest.DB, *pgstore.Store, *pgstore.Store) {
	t.Helper()
	c := pgtest.SharedCitus(t)
	db := c.NewDB(t)
	onWorkers := pgstore.New(db.App, pgstore.Options{WorkerStall: patientStall})
	t.Cleanup(onWorkers.Close)
	viaCoordinator := pgstore.New(db.App, pgstore.Options{CoordinatorReads: true, WorkerStall: patientStall})
	t.Cleanup(viaCoordinator.Close)
	return c, db, onWorkers, viaCoordinator
}
