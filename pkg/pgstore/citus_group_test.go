package pgstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// On Citus a heartbeat batch is applied by one call per worker, for every
// tenant of that worker together (mcp_heartbeat_healthy_group): the call
// updates each server for the tenant that sent its heartbeat only, never
// for another tenant of the same call, and the servers that are not
// healthy go on to their tenant's own call (recovery, deregistered).
func TestCitusHeartbeatGroups(t *testing.T) {
	f := newWorkerTenants(t)
	db, st, a, b, other := f.db, f.st, f.a, f.b, f.other
	ctx := t.Context()
	reg := func(tenant uuid.UUID, module string) registry.Server { return register(t, st, tenant, module) }
	a1, a2, b1, b2, o1 := reg(a, "a1"), reg(a, "a2"), reg(b, "b1"), reg(b, "b2"), reg(other, "o1")
	lastBeat := f.lastBeat

	// A batch of the three tenants makes one call for a and b, whose
	// shards one worker holds, and one for the other.
	groups, err := st.WorkerGroups(ctx, []uuid.UUID{a, other, b, a}, []uuid.UUID{a1.ServerID, o1.ServerID, b1.ServerID, a2.ServerID})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || len(groups[0]) != 3 || len(groups[1]) != 1 || groups[1][0] != other {
		t.Errorf("calls of a batch of tenants a, other, b, a: %v; want a, a and b in one, other in the other", groups)
	}

	// The function itself, as cyberos_app: tenant a names b's server.
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	call := func(tenants, servers []uuid.UUID) map[uuid.UUID]uuid.UUID {
		t.Helper()
		rows, err := db.App.Query(ctx, `SELECT s_server_id, s_tenant_id FROM mcp_heartbeat_healthy_group($1, $2, $3, $4)`,
			tenants[0], tenants, servers, at)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[uuid.UUID]uuid.UUID{}
		for rows.Next() {
			var srv, tenant uuid.UUID
			if err := rows.Scan(&srv, &tenant); err != nil {
				t.Fatal(err)
			}
			got[srv] = tenant
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	b1Beat := lastBeat(b, b1.ServerID)
	got := call([]uuid.UUID{a, b}, []uuid.UUID{b1.ServerID, b2.ServerID})
	if len(got) != 1 || got[b2.ServerID] != b {
		t.Errorf("a's heartbeat of b's b1 beside b's of b2: got %v, want b2 alone", got)
	}
	if !lastBeat(b, b1.ServerID).Equal(b1Beat) {
		t.Error("tenant a's heartbeat of b's server b1 moved its last heartbeat")
	}
	if !lastBeat(b, b2.ServerID).Equal(at) {
		t.Error("b2's heartbeat was not written")
	}
	got = call([]uuid.UUID{a, b, a}, []uuid.UUID{a1.ServerID, a1.ServerID, a2.ServerID})
	if len(got) != 2 || got[a1.ServerID] != a || got[a2.ServerID] != a {
		t.Errorf("a's and b's heartbeats of a1, a's of a2: got %v, want a1 and a2 for a", got)
	}

	// Through the store, many at once so that batches hold several
	// tenants of a worker: every tenant's own servers answer healthy, a's
	// heartbeats of b's server are not found, a deregistered server is,
	// and a degraded one recovers with its event.
	if _, _, err := st.Deregister(ctx, a, a2.ServerID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `UPDATE mcp_servers SET status = 'degraded' WHERE tenant_id = $1 AND server_id = $2`,
		other, o1.ServerID); err != nil {
		t.Fatal(err)
	}
	type beat struct {
		tenant uuid.UUID
		srv    uuid.UUID
		want   error
	}
	// b1 gets no heartbeat of its own tenant: a's must not keep it alive.
	beats := []beat{{a, a1.ServerID, nil}, {b, b2.ServerID, nil}, {a, b1.ServerID, registry.ErrNotFound},
		{a, a2.ServerID, registry.ErrDeregistered}, {other, o1.ServerID, nil}, {b, a1.ServerID, registry.ErrNotFound}}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		recovered int
		failures  []string
	)
	for round := range 50 {
		for _, bt := range beats {
			wg.Go(func() {
				srv, ev, err := st.Heartbeat(ctx, bt.tenant, bt.srv)
				mu.Lock()
				defer mu.Unlock()
				if ev != nil {
					recovered++
				}
				switch {
				case !errors.Is(err, bt.want) || (bt.want == nil && err != nil):
					failures = append(failures, fmt.Sprintf("round %d: tenant %v server %v: %v, want %v", round, bt.tenant, bt.srv, err, bt.want))
				case err == nil && (srv.TenantID != bt.tenant || srv.Status != registry.StatusHealthy):
					failures = append(failures, fmt.Sprintf("round %d: tenant %v server %v: answered %+v", round, bt.tenant, bt.srv, srv))
				}
			})
		}
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if !lastBeat(b, b1.ServerID).Equal(b1Beat) {
		t.Error("tenant a's heartbeats of b's server b1 moved its last heartbeat")
	}
	if recovered != 1 {
		t.Errorf("o1's recovery reported %d times, want once", recovered)
	}
	events, err := st.Events(ctx, other, registry.EventFilter{Kind: registry.KindRecovered, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Events) != 1 {
		t.Errorf("o1's recovered events: %d, want 1", len(events.Events))
	}
}

// workerTenants is a database of the shared Citus cluster with two tenants
// whose shards are on the first worker (a, b) and one on the second
// (other), and a store on it as cyberos_app.
type workerTenants struct {
	t           *testing.T
	db          *pgtest.DB
	st          *pgstore.Store
	a, b, other uuid.UUID
}

func newWorkerTenants(t *testing.T) *workerTenants {
	t.Helper()
	c := pgtest.SharedCitus(t)
	db := c.NewDB(t)
	st := pgstore.New(db.App, pgstore.Options{WorkerStall: patientStall})
	t.Cleanup(st.Close)
	same := c.TenantsOnWorker(t, db, 0, 2)
	return &workerTenants{t: t, db: db, st: st, a: same[0], b: same[1], other: c.TenantOnEachWorker(t, db)[1]}
}

// lastBeat reads a server's last heartbeat.
func (f *workerTenants) lastBeat(tenant, server uuid.UUID) time.Time {
	f.t.Helper()
	var at time.Time
	if err := f.db.Admin.QueryRow(f.t.Context(), `SELECT last_heartbeat_at FROM mcp_servers WHERE tenant_id = $1 AND server_id = $2`,
		tenant, server).Scan(&at); err != nil {
		f.t.Fatal(err)
	}
	return at
}
