package pgstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/storetest"
)

// connectThrough opens the store's own pool (pgstore.Connect, as mcpd
// does) on db's app role through bouncer.
func connectThrough(t *testing.T, bouncer *pgtest.PgBouncer, db *pgtest.DB) *pgstore.Store {
	t.Helper()
	pool, err := pgstore.Connect(t.Context(), bouncer.URL(db.AppURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	clock := clockwork.NewFakeClockAt(epoch)
	st := pgstore.New(pool, pgstore.Options{Clock: clock})
	t.Cleanup(st.Close)
	return st
}

// The whole store suite passes through pgbouncer in transaction mode,
// where no session state (prepared statements, SET, advisory locks)
// outlives a transaction.
func TestConformanceThroughPgBouncer(t *testing.T) {
	conformanceThroughPgBouncer(t, pgtest.Shared(t))
}

// The same on Citus, pgbouncer in front of the coordinator.
func TestCitusConformanceThroughPgBouncer(t *testing.T) {
	conformanceThroughPgBouncer(t, pgtest.SharedCitus(t))
}

func conformanceThroughPgBouncer(t *testing.T, engine pgtest.Engine) {
	bouncer := engine.StartPgBouncer(t, pgtest.PgBouncerOptions{})
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		db := engine.NewDB(t)
		pool, err := pgstore.Connect(t.Context(), bouncer.URL(db.AppURL))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return harnessOn(t, db, pool)
	})
}

// Tenants working at once through a pooler of two server connections
// never see each other's servers: the tenant setting of one transaction
// does not outlive it on the server connection the next client gets.
func TestTenantIsolationThroughPgBouncer(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	bouncer := c.StartPgBouncer(t, pgtest.PgBouncerOptions{PoolSize: 2})
	db := c.NewDB(t)
	st := connectThrough(t, bouncer, db)
	ctx := t.Context()
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("ping through pgbouncer: %v", err)
	}

	const tenants, modules, rounds = 6, 4, 5
	ids := make([]uuid.UUID, tenants)
	for i := range ids {
		ids[i] = uuid.New()
	}
	var wg sync.WaitGroup
	errs := make(chan error, tenants)
	for ti, tenant := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				var servers []registry.Server
				for m := range modules {
					srv, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{
						ModuleName: fmt.Sprintf("t%d-m%d", ti, m), Version: "1.0.0",
						SupportedProtocols: []string{"2025-06-18"},
						Skills:             []registry.SkillInfo{{Name: "search"}},
					}, 0)
					if err != nil {
						return fmt.Errorf("tenant %d: register: %w", ti, err)
					}
					servers = append(servers, srv)
				}
				for range rounds {
					for _, srv := range servers {
						if _, _, err := st.Heartbeat(ctx, tenant, srv.ServerID); err != nil {
							return fmt.Errorf("tenant %d: heartbeat: %w", ti, err)
						}
					}
					page, err := st.Servers(ctx, tenant, registry.ServerFilter{Limit: 100})
					if err != nil {
						return fmt.Errorf("tenant %d: list: %w", ti, err)
					}
					if len(page.Servers) != modules {
						return fmt.Errorf("tenant %d: listed %d servers, want its own %d", ti, len(page.Servers), modules)
					}
					for _, srv := range page.Servers {
						if srv.TenantID != tenant {
							return fmt.Errorf("tenant %d: listed %s of tenant %s", ti, srv.ModuleName, srv.TenantID)
						}
					}
					// Another tenant's server is not found.
					other := ids[(ti+1)%tenants]
					if _, err := st.Server(ctx, other, servers[0].ServerID); !errors.Is(err, registry.ErrNotFound) {
						return fmt.Errorf("tenant %d: its server read as another tenant: %v, want ErrNotFound", ti, err)
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The sweep (every tenant) works through the pooler too.
	res, err := st.Sweep(ctx, store.SweepRequest{Now: time.Now().Add(time.Hour), Interval: 10 * time.Second, Limit: 1000})
	evs := res.Events
	if err != nil {
		t.Fatalf("sweep through pgbouncer: %v", err)
	}
	if len(evs) != tenants*modules {
		t.Fatalf("sweep: %d events, want %d", len(evs), tenants*modules)
	}
}
