package alert_test

import (
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// Two replicas whose stores reach the database through pgbouncer in
// transaction mode deliver each event once per destination: the claim of
// a destination holds nothing across transactions.
func TestTwoReplicasThroughPgBouncer(t *testing.T) {
	c := pgtest.SharedEngine(t)
	bouncer := c.StartPgBouncer(t, pgtest.PgBouncerOptions{PoolSize: 2})
	f := &pgFixture{ctx: t.Context(), db: c.NewDB(t), clock: clockwork.NewFakeClockAt(epoch)}
	through := func() *pgstore.Store {
		pool, err := pgstore.Connect(f.ctx, bouncer.URL(f.db.AppURL))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return f.newStore(t, pool)
	}
	f.store = through()
	hookA := newReceiver(t, nil)
	hookB := newReceiver(t, nil)
	replica := func(outbox store.AlertOutbox) { startReplica(t, outbox, hookA, hookB) }
	replica(f.store)
	replica(through())

	tenant, servers, evs := f.unhealthyServers(t, 30)
	for _, srv := range servers[:15] {
		_, ev, err := f.store.Heartbeat(f.ctx, tenant, srv.ServerID)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, *ev)
	}
	assertDeliveredOnce(t, evs, map[string]*receiver{"a": hookA, "b": hookB})
}
