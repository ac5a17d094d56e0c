package memstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/storetest"
)

const interval = 10 * time.Second

// outboxFixture registers servers on a store whose clock the test moves.
type outboxFixture struct {
	t     *testing.T
	ctx   context.Context
	clock *clockwork.FakeClock
	s     *memstore.Store
}

func newOutboxFixture(t *testing.T) *outboxFixture {
	clock := clockwork.NewFakeClockAt(storetest.Start)
	return &outboxFixture{t: t, ctx: t.Context(), clock: clock, s: memstore.New(clock)}
}

func (f *outboxFixture) register(tenant uuid.UUID, module string) registry.Server {
	f.t.Helper()
	srv, _, _, err := f.s.Register(f.ctx, tenant, info(module, 1), 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return srv
}

// sweep moves the clock by d and sweeps.
func (f *outboxFixture) sweep(d time.Duration) []registry.Event {
	f.t.Helper()
	f.clock.Advance(d)
	result, err := f.s.Sweep(f.ctx, store.SweepRequest{Now: time.Time{}, Interval: interval, Limit: 1000})
	evs := result.Events
	if err != nil {
		f.t.Fatal(err)
	}
	return evs
}

func (f *outboxFixture) claim(dest string, limit int) store.AlertClaim {
	f.t.Helper()
	c, err := f.s.ClaimAlerts(f.ctx, dest, limit)
	if err != nil {
		f.t.Fatal(err)
	}
	if c == nil {
		f.t.Fatalf("claim %s: held by another caller", dest)
	}
	return c
}

func kinds(evs []registry.Event) string {
	out := ""
	for _, e := range evs {
		out += fmt.Sprintf("%s/%s ", e.ModuleName, e.Kind)
	}
	return out
}

// Events of every tenant come back in the order they were written, only
// of the alert kinds, with their tenant; each destination has its cursor.
func TestClaimAlertsOrderAcrossTenants(t *testing.T) {
	f := newOutboxFixture(t)
	tenants := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	var servers []registry.Server
	for i, tn := range tenants {
		servers = append(servers, f.register(tn, fmt.Sprintf("m%d", i)))
	}
	f.sweep(20 * time.Second) // degraded: not an alert kind
	f.sweep(10 * time.Second) // unhealthy, in registration order
	for _, i := range []int{2, 0} {
		if _, _, err := f.s.Heartbeat(f.ctx, tenants[i], servers[i].ServerID); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := f.s.Deregister(f.ctx, tenants[1], servers[1].ServerID); err != nil {
		t.Fatal(err)
	}
	want := "m0/mcp.server.unhealthy m1/mcp.server.unhealthy m2/mcp.server.unhealthy " +
		"m2/mcp.server.recovered m0/mcp.server.recovered m1/mcp.server.deregistered "

	c := f.claim("a", 100)
	evs := c.Events()
	if got := kinds(evs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	for i, e := range evs {
		if i > 0 && e.Seq <= evs[i-1].Seq {
			t.Fatalf("event %d seq %d after %d", i, e.Seq, evs[i-1].Seq)
		}
		if want := servers[map[string]int{"m0": 0, "m1": 1, "m2": 2}[e.ModuleName]].TenantID; e.TenantID != want {
			t.Fatalf("event %d tenant %s, want %s", i, e.TenantID, want)
		}
	}
	if err := c.Ack(f.ctx, 2); err != nil {
		t.Fatal(err)
	}
	c = f.claim("a", 100)
	if got, want := kinds(c.Events()), want[len("m0/mcp.server.unhealthy m1/mcp.server.unhealthy "):]; got != want {
		t.Fatalf("after ack 2:\n got %s\nwant %s", got, want)
	}
	c.Release(f.ctx)
	// Another destination starts at the beginning.
	c = f.claim("b", 100)
	if len(c.Events()) != 6 {
		t.Fatalf("destination b: %d events, want 6", len(c.Events()))
	}
	c.Release(f.ctx)
}

// A batch smaller than the backlog stops where it ends, whichever tenants
// the rest belongs to; acknowledging it all goes on from there.
func TestClaimAlertsLimit(t *testing.T) {
	t.Run("seven tenants", func(t *testing.T) { testClaimAlertsLimit(t, false) })
	t.Run("one tenant", func(t *testing.T) { testClaimAlertsLimit(t, true) })
}

func testClaimAlertsLimit(t *testing.T, oneTenant bool) {
	f := newOutboxFixture(t)
	tenant := uuid.New()
	for i := range 7 {
		if !oneTenant {
			tenant = uuid.New()
		}
		f.register(tenant, fmt.Sprintf("m%d", i))
	}
	f.sweep(30 * time.Second)
	var got []registry.Event
	for range 10 {
		c := f.claim("a", 3)
		evs := c.Events()
		if len(evs) == 0 {
			c.Release(f.ctx)
			break
		}
		if len(evs) > 3 {
			t.Fatalf("%d events, limit 3", len(evs))
		}
		got = append(got, evs...)
		if err := c.Ack(f.ctx, len(evs)); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 7 {
		t.Fatalf("%d events delivered in batches of 3, want 7: %s", len(got), kinds(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Fatalf("out of order: %s", kinds(got))
		}
	}
	if _, err := f.s.ClaimAlerts(f.ctx, "a", 0); err == nil {
		t.Fatal("limit 0: no error")
	}
}

// One caller at a time holds a destination's claim; others get nil until
// it is acknowledged or released; other destinations are not affected.
func TestClaimAlertsExclusive(t *testing.T) {
	f := newOutboxFixture(t)
	f.register(uuid.New(), "calendar")
	f.sweep(30 * time.Second)

	c := f.claim("a", 10)
	if other, err := f.s.ClaimAlerts(f.ctx, "a", 10); err != nil || other != nil {
		t.Fatalf("second claim of a: %v, %v; want nil, nil", other, err)
	}
	f.claim("b", 10).Release(f.ctx)
	c.Release(f.ctx)
	c.Release(f.ctx) // idempotent
	c = f.claim("a", 10)
	if len(c.Events()) != 1 {
		t.Fatalf("after release: %d events, want 1 (not acknowledged)", len(c.Events()))
	}
	if err := c.Ack(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(f.ctx, 1); err == nil {
		t.Fatal("second ack: no error")
	}
	c = f.claim("a", 10)
	if len(c.Events()) != 0 {
		t.Fatalf("after ack: %d events, want 0", len(c.Events()))
	}
	c.Release(f.ctx)

	// Concurrent claimers: exactly one wins each time.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for range 8 {
		wg.Go(func() {
			c, err := f.s.ClaimAlerts(f.ctx, "c", 10)
			if err != nil {
				t.Error(err)
				return
			}
			if c != nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d concurrent claims won, want 1", wins)
	}
}

// An acknowledgement with a cancelled context moves nothing but ends the
// claim; acknowledging past the batch acknowledges the batch.
func TestAckEdges(t *testing.T) {
	f := newOutboxFixture(t)
	f.register(uuid.New(), "calendar")
	f.sweep(30 * time.Second)

	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	c := f.claim("a", 10)
	if err := c.Ack(ctx, 1); err == nil {
		t.Fatal("ack with a cancelled context: no error")
	}
	c = f.claim("a", 10)
	if len(c.Events()) != 1 {
		t.Fatalf("%d events, want 1", len(c.Events()))
	}
	if err := c.Ack(f.ctx, 5); err != nil {
		t.Fatal(err)
	}
	if n, _, err := f.s.PendingAlerts(f.ctx, "a"); err != nil || n != 0 {
		t.Fatalf("pending %d, %v; want 0", n, err)
	}
	if _, err := f.s.ClaimAlerts(ctx, "a", 10); err == nil {
		t.Fatal("claim with a cancelled context: no error")
	}
}

// Acknowledging an empty batch skips the other kinds written before it, so
// that claims do not scan them again; a later alert event still comes.
func TestAckEmptyBatchSkipsOtherKinds(t *testing.T) {
	f := newOutboxFixture(t)
	tenant := uuid.New()
	srv := f.register(tenant, "calendar")
	f.sweep(20 * time.Second) // degraded
	c := f.claim("a", 10)
	if len(c.Events()) != 0 {
		t.Fatalf("%d events, want 0: %s", len(c.Events()), kinds(c.Events()))
	}
	if err := c.Ack(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	f.sweep(10 * time.Second) // unhealthy
	c = f.claim("a", 10)
	if got := kinds(c.Events()); got != "calendar/mcp.server.unhealthy " {
		t.Fatalf("events %q", got)
	}
	if c.Events()[0].ServerID != srv.ServerID {
		t.Fatal("wrong server")
	}
	c.Release(f.ctx)
}

func TestPendingAlertsAndUnhealthyServers(t *testing.T) {
	f := newOutboxFixture(t)
	tenant := uuid.New()
	a := f.register(tenant, "alpha")
	f.clock.Advance(6 * time.Second)
	b := f.register(tenant, "beta")
	f.register(uuid.New(), "gamma")

	if n, oldest, err := f.s.PendingAlerts(f.ctx, "x"); err != nil || n != 0 || !oldest.IsZero() {
		t.Fatalf("pending before any alert: %d, %v, %v", n, oldest, err)
	}
	if list, err := f.s.UnhealthyServers(f.ctx); err != nil || len(list) != 0 {
		t.Fatalf("unhealthy before any: %v, %v", list, err)
	}
	f.sweep(24 * time.Second) // alpha unhealthy (30 s), beta and gamma degraded (24 s)
	firstAt := f.clock.Now()
	f.sweep(6 * time.Second) // beta and gamma unhealthy
	if _, _, err := f.s.Heartbeat(f.ctx, tenant, b.ServerID); err != nil {
		t.Fatal(err)
	}
	n, oldest, err := f.s.PendingAlerts(f.ctx, "x")
	if err != nil || n != 4 || !oldest.Equal(firstAt.UTC()) {
		t.Fatalf("pending: %d, %v, %v; want 4, %v", n, oldest, err, firstAt.UTC())
	}
	list, err := f.s.UnhealthyServers(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ServerID != a.ServerID || list[1].ModuleName != "gamma" {
		t.Fatalf("unhealthy: %+v", list)
	}
	u := list[0]
	if u.TenantID != tenant || u.ModuleName != "alpha" || u.Version != "1.3.2" || u.TraceID != a.TraceID ||
		!u.LastHeartbeatAt.Equal(storetest.Start) || !u.UnhealthySince.Equal(firstAt.UTC()) {
		t.Fatalf("alpha: %+v", u)
	}

	// Unhealthy again after a recovery: since the latest transition.
	if _, _, err := f.s.Heartbeat(f.ctx, tenant, a.ServerID); err != nil {
		t.Fatal(err)
	}
	f.sweep(30 * time.Second)
	list, err = f.s.UnhealthyServers(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var again store.UnhealthyServer
	for _, u := range list {
		if u.ServerID == a.ServerID {
			again = u
		}
	}
	if !again.UnhealthySince.Equal(f.clock.Now().UTC()) {
		t.Fatalf("alpha unhealthy since %v, want %v", again.UnhealthySince, f.clock.Now().UTC())
	}

	c := f.claim("x", 100)
	total := int64(len(c.Events()))
	c.Release(f.ctx)
	c = f.claim("x", 2)
	if err := c.Ack(f.ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n, _, err := f.s.PendingAlerts(f.ctx, "x"); err != nil || n != total-2 {
		t.Fatalf("pending after ack of 2 of %d: %d, %v", total, n, err)
	}
}
