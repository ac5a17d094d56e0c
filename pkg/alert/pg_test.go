package alert_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cyberos/mcpd/pkg/alert"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// pgFixture is a database of its own with a store on the app role.
type pgFixture struct {
	ctx   context.Context
	db    *pgtest.DB
	clock *clockwork.FakeClock
	store *pgstore.Store
}

func newPGFixture(t *testing.T) *pgFixture {
	t.Helper()
	f := &pgFixture{ctx: t.Context(), db: pgtest.NewDB(t), clock: clockwork.NewFakeClockAt(epoch)}
	f.store = f.newStore(t, f.db.App)
	return f
}

// newStore is another store over pool, as a restarted or second mcpd has.
func (f *pgFixture) newStore(t *testing.T, pool *pgxpool.Pool) *pgstore.Store {
	st := pgstore.New(pool, pgstore.Options{Clock: f.clock})
	t.Cleanup(st.Close)
	return st
}

// newPool is a pool of its own on the app role, as another replica has.
func (f *pgFixture) newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(f.ctx, f.db.AppURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// unhealthyServers registers n servers of one tenant and sweeps them
// unhealthy; it returns the tenant, the servers and their events.
func (f *pgFixture) unhealthyServers(t *testing.T, n int) (uuid.UUID, []registry.Server, []registry.Event) {
	t.Helper()
	tenant := uuid.New()
	var servers []registry.Server
	for i := range n {
		srv, _, _, err := f.store.Register(f.ctx, tenant, serverInfo(fmt.Sprintf("m%02d", i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, srv)
	}
	result, err := f.store.Sweep(f.ctx, store.SweepRequest{Now: f.clock.Now().Add(35 * time.Second), Interval: interval, Limit: 1000})
	evs := result.Events
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != n {
		t.Fatalf("sweep: %d events, want %d", len(evs), n)
	}
	return tenant, servers, evs
}

// An alert that could not be delivered before mcpd stopped is delivered by
// the next mcpd over the same database, to the same destination.
func TestRestartDurability(t *testing.T) {
	f := newPGFixture(t)
	_, servers, evs := f.unhealthyServers(t, 1)
	down := func(int) int { return http.StatusServiceUnavailable }
	hook := newReceiver(t, down)
	am := newReceiver(t, down)
	client := httpClient(t)
	dests, err := alert.NewDestinations([]string{am.srv.URL}, hook.srv.URL, "", client)
	if err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	_, stop := start(t, fast(alert.DispatcherOptions{Outbox: f.store, Destinations: dests, Registerer: reg}))
	waitMetricAtLeast(t, reg, "mcpd_alerts_failed_total", dests[0].Name(), 2)
	waitMetricAtLeast(t, reg, "mcpd_alerts_failed_total", dests[1].Name(), 2)
	stop()
	f.store.Close()
	for _, d := range dests {
		if n, _, err := f.store.PendingAlerts(f.ctx, d.Name()); err != nil || n != 1 {
			t.Fatalf("%s: %d pending after the first mcpd, %v; want 1", d.Name(), n, err)
		}
	}

	// "Restart": a new store on a new pool, a new dispatcher, the same
	// destinations, which now answer.
	hook.setAnswer(nil)
	am.setAnswer(nil)
	restarted := f.newStore(t, f.newPool(t))
	dests, err = alert.NewDestinations([]string{am.srv.URL}, hook.srv.URL, "", client)
	if err != nil {
		t.Fatal(err)
	}
	start(t, fast(alert.DispatcherOptions{Outbox: restarted, Destinations: dests}))
	reqs := hook.waitFor(t, "the webhook after the restart", atLeast(1))
	if id := reqs[0].header.Get(alert.HeaderEventID); id != evs[0].EventID.String() {
		t.Fatalf("webhook event %s, want %s", id, evs[0].EventID)
	}
	got := amAlerts(t, am.waitFor(t, "alertmanager after the restart", atLeast(1))[0])
	if len(got) != 1 || got[0]["labels"].(map[string]any)["server_id"] != servers[0].ServerID.String() ||
		got[0]["startsAt"] != "2026-05-17T10:00:35Z" {
		t.Fatalf("alertmanager got %v", got)
	}
	for _, d := range dests {
		testwait.Until(t, d.Name()+": nothing pending", waitTimeout, func() bool {
			n, _, err := restarted.PendingAlerts(f.ctx, d.Name())
			if err != nil {
				t.Fatal(err)
			}
			return n == 0
		})
	}
}

// Two replicas on one database deliver each event once per destination:
// the cursor's claim lets one of them deliver each batch.
func TestTwoReplicas(t *testing.T) {
	f := newPGFixture(t)
	hookA := newReceiver(t, nil)
	hookB := newReceiver(t, nil)
	replica := func(outbox store.AlertOutbox) { startReplica(t, outbox, hookA, hookB) }
	replica(f.store)
	replica(f.newStore(t, f.newPool(t)))

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

// Two replicas deliver each event once per destination also when a batch
// holds events of several tenants: on Citus, tenants whose shards are on
// different workers (8 tenants: on two workers but once in 128 runs),
// whose positions an acknowledgement moves on both. The recoveries carry
// the fake clock's time, before their unhealthy events': this test found
// the claim that ordered by time alone and lost 20 of 60 alerts
// (TestOutboxTenantOrderAcrossTimes). The claim's release after the
// positions commit (pgstore's alertClaim.Ack) is reasoned, not shown here:
// with it undone, 4 runs on Citus passed.
func TestTwoReplicasTenantsOnEveryWorker(t *testing.T) {
	f := newPGFixture(t)
	hookA := newReceiver(t, nil)
	hookB := newReceiver(t, nil)
	var evs []registry.Event
	type server struct{ tenant, id uuid.UUID }
	var servers []server
	for range 8 {
		tenant := uuid.New()
		for i := range 5 {
			srv, _, _, err := f.store.Register(f.ctx, tenant, serverInfo(fmt.Sprintf("m%02d", i)), 0)
			if err != nil {
				t.Fatal(err)
			}
			servers = append(servers, server{tenant, srv.ServerID})
		}
	}
	result, err := f.store.Sweep(f.ctx, store.SweepRequest{Now: f.clock.Now().Add(35 * time.Second), Interval: interval, Limit: 1000})
	if err != nil || len(result.Events) != len(servers) {
		t.Fatalf("sweep: %d events, %v; want %d", len(result.Events), err, len(servers))
	}
	evs = append(evs, result.Events...)
	startReplica(t, f.store, hookA, hookB)
	startReplica(t, f.newStore(t, f.newPool(t)), hookA, hookB)
	for _, srv := range servers[:len(servers)/2] {
		_, ev, err := f.store.Heartbeat(f.ctx, srv.tenant, srv.id)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, *ev)
	}
	assertDeliveredOnce(t, evs, map[string]*receiver{"a": hookA, "b": hookB})
}

// outboxStores open each store with an alert outbox, on a fake clock at
// epoch.
func outboxStores() map[string]func(t *testing.T) (store.Store, store.AlertOutbox, *clockwork.FakeClock) {
	return map[string]func(t *testing.T) (store.Store, store.AlertOutbox, *clockwork.FakeClock){
		"memory": func(t *testing.T) (store.Store, store.AlertOutbox, *clockwork.FakeClock) {
			clock := clockwork.NewFakeClockAt(epoch)
			s := memstore.New(clock)
			return s, s, clock
		},
		"postgres": func(t *testing.T) (store.Store, store.AlertOutbox, *clockwork.FakeClock) {
			f := newPGFixture(t)
			return f.store, f.store, f.clock
		},
	}
}

// A tenant's events whose times are not in position order (each
// transaction stamps its own time, and takes its positions when it locks
// the tenant's counter) are claimed in position order, and batches cut
// between tenants deliver every event once. Ordered by time alone, a batch
// of PostgreSQL's took a tenant's recovery before its earlier unhealthy
// event, and the acknowledgement of the recovery passed over the other:
// an alert lost.
func TestOutboxTenantOrderAcrossTimes(t *testing.T) {
	for name, open := range outboxStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st, outbox, clock := open(t)
			// Ordered by id, so that the batch ends where it lost the
			// event: the first tenant's unhealthy event sorts before the
			// second's at the same time.
			first := uuid.MustParse("00000000-0000-4000-8000-000000000001")
			second := uuid.MustParse("ffffffff-ffff-4fff-bfff-ffffffffffff")
			var recovering registry.Server
			for _, tenant := range []uuid.UUID{first, second} {
				srv, _, _, err := st.Register(ctx, tenant, serverInfo("alpha"), 0)
				if err != nil {
					t.Fatal(err)
				}
				recovering = srv
			}
			// Both unhealthy 35 s on; the second tenant's server then
			// recovers by a heartbeat stamped at the clock's time, before
			// its unhealthy event's.
			if _, err := st.Sweep(ctx, store.SweepRequest{Now: clock.Now().Add(35 * time.Second), Interval: interval, Limit: 1000}); err != nil {
				t.Fatal(err)
			}
			if _, ev, err := st.Heartbeat(ctx, second, recovering.ServerID); err != nil || ev == nil || ev.Kind != registry.KindRecovered {
				t.Fatalf("heartbeat: %+v, %v; want a recovery", ev, err)
			}
			claimed := map[uuid.UUID][]string{}
			for round := range 5 {
				c, err := outbox.ClaimAlerts(ctx, "d", 2)
				if err != nil || c == nil {
					t.Fatalf("claim %d: %v, %v", round, c, err)
				}
				evs := c.Events()
				for _, ev := range evs {
					claimed[ev.TenantID] = append(claimed[ev.TenantID], string(ev.Kind))
				}
				if err := c.Ack(ctx, len(evs)); err != nil {
					t.Fatal(err)
				}
				if len(evs) == 0 {
					break
				}
			}
			want := map[uuid.UUID][]string{
				first:  {string(registry.KindUnhealthy)},
				second: {string(registry.KindUnhealthy), string(registry.KindRecovered)},
			}
			if fmt.Sprint(claimed) != fmt.Sprint(want) {
				t.Fatalf("claimed %v, want %v: every event once, each tenant's in order", claimed, want)
			}
		})
	}
}

// The outbox behaves the same on both stores: one claim per destination,
// partial acknowledgement, pending counts, unhealthy servers.
func TestOutboxConformance(t *testing.T) {
	for name, open := range outboxStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st, outbox, clock := open(t)
			tenant := uuid.New()
			var servers []registry.Server
			for _, m := range []string{"alpha", "beta", "gamma"} {
				srv, _, _, err := st.Register(ctx, tenant, serverInfo(m), 0)
				if err != nil {
					t.Fatal(err)
				}
				servers = append(servers, srv)
			}
			sweptAt := clock.Now().Add(35 * time.Second).UTC()
			if _, err := st.Sweep(ctx, store.SweepRequest{Now: sweptAt, Interval: interval, Limit: 1000}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(40 * time.Second)
			if _, _, err := st.Heartbeat(ctx, tenant, servers[1].ServerID); err != nil {
				t.Fatal(err)
			}

			// A first claim that commits creates the destination's
			// cursor: on PostgreSQL a claim of a destination whose cursor
			// is still being created waits for it instead of returning nil.
			c, err := outbox.ClaimAlerts(ctx, "d", 2)
			if err != nil || c == nil {
				t.Fatalf("claim: %v, %v", c, err)
			}
			if err := c.Ack(ctx, 0); err != nil {
				t.Fatal(err)
			}
			c, err = outbox.ClaimAlerts(ctx, "d", 2)
			if err != nil || c == nil {
				t.Fatalf("claim: %v, %v", c, err)
			}
			if other, err := outbox.ClaimAlerts(ctx, "d", 2); err != nil || other != nil {
				t.Fatalf("second claim while held: %v, %v; want nil, nil", other, err)
			}
			if evs := c.Events(); len(evs) != 2 || evs[0].Kind != registry.KindUnhealthy || evs[0].TenantID != tenant {
				t.Fatalf("events %+v", evs)
			}
			if err := c.Ack(ctx, 1); err != nil {
				t.Fatal(err)
			}
			n, oldest, err := outbox.PendingAlerts(ctx, "d")
			if err != nil || n != 3 || !oldest.Equal(sweptAt) {
				t.Fatalf("pending %d, %v, %v; want 3, %v", n, oldest, err, sweptAt)
			}
			c, err = outbox.ClaimAlerts(ctx, "d", 10)
			if err != nil || c == nil {
				t.Fatalf("claim: %v, %v", c, err)
			}
			var kinds []registry.EventKind
			for _, e := range c.Events() {
				kinds = append(kinds, e.Kind)
			}
			if want := []registry.EventKind{registry.KindUnhealthy, registry.KindUnhealthy, registry.KindRecovered}; fmt.Sprint(kinds) != fmt.Sprint(want) {
				t.Fatalf("after ack 1: %v, want %v", kinds, want)
			}
			c.Release(ctx)

			list, err := outbox.UnhealthyServers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 2 {
				t.Fatalf("unhealthy %+v, want alpha and gamma", list)
			}
			for _, u := range list {
				if u.ServerID == servers[1].ServerID || u.TenantID != tenant || u.Version != "1.3.2" ||
					u.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || !u.UnhealthySince.Equal(sweptAt) ||
					!u.LastHeartbeatAt.Equal(epoch) {
					t.Fatalf("unhealthy server %+v", u)
				}
			}

			// Registering again ends gamma's incident (unhealthy): that
			// registration is in the outbox; beta's (healthy) is not.
			c, err = outbox.ClaimAlerts(ctx, "d", 10)
			if err != nil || c == nil {
				t.Fatalf("claim: %v, %v", c, err)
			}
			if err := c.Ack(ctx, len(c.Events())); err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"gamma", "beta"} {
				if _, _, _, err := st.Register(ctx, tenant, serverInfo(m), 0); err != nil {
					t.Fatal(err)
				}
			}
			c, err = outbox.ClaimAlerts(ctx, "d", 10)
			if err != nil || c == nil {
				t.Fatalf("claim: %v, %v", c, err)
			}
			evs := c.Events()
			if len(evs) != 1 || evs[0].Kind != registry.KindRegistered || evs[0].ServerID != servers[2].ServerID ||
				evs[0].FromStatus == nil || *evs[0].FromStatus != registry.StatusUnhealthy {
				t.Fatalf("after registering gamma (unhealthy) and beta (healthy) again: %+v, want gamma's registration from unhealthy", evs)
			}
			if n, _, err := outbox.PendingAlerts(ctx, "d"); err != nil || n != 1 {
				t.Fatalf("pending %d, %v; want 1", n, err)
			}
			c.Release(ctx)
		})
	}
}

// On PostgreSQL too, a destination that hangs delays nothing for another,
// for events written while it hangs as well as before: its claim is a
// lease on its own cursor, which no other destination's reads wait for.
// The first attempt hangs until the test fails it, the retry for the rest
// of the test: had another destination waited for either, the events
// written meanwhile would never arrive.
func TestDestinationIsolationPG(t *testing.T) {
	f := newPGFixture(t)
	firstFails := make(chan struct{})
	var attempts atomic.Int32
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if attempts.Add(1) == 1 {
			select {
			case <-firstFails:
				w.WriteHeader(http.StatusGatewayTimeout)
			case <-req.Context().Done():
			}
			return
		}
		<-req.Context().Done()
	}))
	t.Cleanup(hanging.Close)
	working := newReceiver(t, nil)
	// No client timeout cuts the hanging requests short.
	patient := httpClient(t)
	patient.Timeout = 0
	patient.Transport.(*http.Transport).ResponseHeaderTimeout = 0
	var dests []alert.Destination
	for i, u := range []string{hanging.URL, working.srv.URL} {
		client := patient
		if i == 1 {
			client = httpClient(t)
		}
		w, err := alert.NewWebhook(u, nil, client)
		if err != nil {
			t.Fatal(err)
		}
		dests = append(dests, w)
	}
	f.unhealthyServers(t, 1)
	start(t, fast(alert.DispatcherOptions{Outbox: f.store, Destinations: dests}))
	working.waitFor(t, "the first event", atLeast(1))
	testwait.Eventually(t, "the hanging destination tried", func() bool { return attempts.Load() > 0 })

	f.unhealthyServers(t, 1) // written while the first attempt hangs
	close(firstFails)
	testwait.Eventually(t, "the hanging destination retried", func() bool { return attempts.Load() >= 2 })
	working.waitFor(t, "the event written while the first attempt hung", atLeast(2))
	f.unhealthyServers(t, 1) // written while a retry hangs
	working.waitFor(t, "the event written while a retry hung", atLeast(3))
	if n := attempts.Load(); n != 2 {
		t.Fatalf("the hanging destination: %d attempts, want 2 (the retry still in flight)", n)
	}
}
