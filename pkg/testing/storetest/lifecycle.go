package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// The health lifecycle: thresholds, the cascade and recovery.
var lifecycleCases = []testCase{
	{"three_miss_unhealthy", threeMissUnhealthy},
	{"recovery_on_heartbeat", recoveryOnHeartbeat},
	{"skill_unavailable_propagation", skillUnavailablePropagation},
	{"two_misses_degraded", twoMissesDegraded},
	{"single_miss_never_unhealthy", singleMissNeverUnhealthy},
	{"exact_boundaries", exactBoundaries},
	{"degraded_then_unhealthy", degradedThenUnhealthy},
	{"recovery_from_degraded", recoveryFromDegraded},
	{"recovery_from_unhealthy", recoveryFromUnhealthy},
	{"own_reason_survives_recovery", ownReasonSurvivesRecovery},
	{"deregister", deregister},
	{"deregister_idempotent", deregisterIdempotent},
	{"heartbeat_after_deregister", heartbeatAfterDeregister},
	{"monitor_ignores_deregistered", monitorIgnoresDeregistered},
	{"sweep_now", sweepNow},
	{"sweep_limit", sweepLimit},
	{"sweep_limit_across_tenants", sweepLimitAcrossTenants},
	{"sweep_every_tenant", sweepEveryTenant},
	{"one_event_per_transition", oneEventPerTransition},
	{"count_by_status", countByStatus},
}

// The design's case: three missed heartbeats make a server unhealthy and
// every skill unavailable.
func threeMissUnhealthy(e *env) {
	srv := e.registerNew(e.info("calendar", "list-events", "create-event"))
	e.advance(35 * time.Second)
	ev := e.sweepOne()
	e.checkEvent(ev, evWant{kind: registry.KindUnhealthy, srv: srv, from: registry.StatusHealthy,
		to: registry.StatusUnhealthy, at: e.now(), affected: []string{"create-event", "list-events"}})
	e.wantLogged(ev)
	got := e.server(srv.ServerID)
	e.checkServer(got, srvWant{status: registry.StatusUnhealthy, heartbeat: Start, registered: Start})
	e.wantSkills(srv.ServerID, reasons(registry.ReasonServerUnhealthy, "list-events", "create-event"))
	e.sweepNone()
}

// The design's case: a heartbeat from unhealthy recovers at once.
func recoveryOnHeartbeat(e *env) {
	srv := e.registerNew(e.info("calendar", "list-events", "create-event"))
	e.advance(35 * time.Second)
	e.sweepOne()
	e.advance(time.Second)
	got, ev := e.heartbeat(srv.ServerID)
	e.checkServer(got, srvWant{status: registry.StatusHealthy, heartbeat: e.now(), registered: Start})
	if ev == nil {
		e.t.Fatalf("heartbeat from unhealthy: no event, want %s", registry.KindRecovered)
	}
	e.checkEvent(*ev, evWant{kind: registry.KindRecovered, srv: srv, from: registry.StatusUnhealthy,
		to: registry.StatusHealthy, at: e.now(), affected: []string{"create-event", "list-events"}})
	e.wantLogged(*ev)
	e.wantSkills(srv.ServerID, reasons("", "list-events", "create-event"))
	e.wantStatus(srv.ServerID, registry.StatusHealthy)
	e.sweepNone()
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindUnhealthy, registry.KindRecovered)
}

// The design's case: the cascade takes every available skill away and gives
// back only those it took.
func skillUnavailablePropagation(e *env) {
	srv := e.registerNew(e.info("calendar", "a", "b", "c"))
	e.disable(srv.ServerID, "c", "quota_exceeded")
	e.wantSkills(srv.ServerID, merge(reasons("", "a", "b"), reasons("quota_exceeded", "c")))

	e.advance(30 * time.Second)
	ev := e.sweepOne()
	e.checkEvent(ev, evWant{kind: registry.KindUnhealthy, srv: srv, from: registry.StatusHealthy,
		to: registry.StatusUnhealthy, at: e.now(), affected: []string{"a", "b"}})
	e.wantSkills(srv.ServerID, merge(reasons(registry.ReasonServerUnhealthy, "a", "b"), reasons("quota_exceeded", "c")))

	_, rec := e.heartbeat(srv.ServerID)
	if rec == nil {
		e.t.Fatalf("heartbeat from unhealthy: no event")
	}
	e.checkEvent(*rec, evWant{kind: registry.KindRecovered, srv: srv, from: registry.StatusUnhealthy,
		to: registry.StatusHealthy, at: e.now(), affected: []string{"a", "b"}})
	e.wantSkills(srv.ServerID, merge(reasons("", "a", "b"), reasons("quota_exceeded", "c")))
}

// Two misses make a server degraded; its skills stay available.
func twoMissesDegraded(e *env) {
	srv := e.registerNew(e.info("calendar", "a", "b"))
	e.advance(25 * time.Second)
	ev := e.sweepOne()
	e.checkEvent(ev, evWant{kind: registry.KindDegraded, srv: srv, from: registry.StatusHealthy,
		to: registry.StatusDegraded, at: e.now()})
	e.wantLogged(ev)
	e.checkServer(e.server(srv.ServerID), srvWant{status: registry.StatusDegraded, heartbeat: Start, registered: Start})
	e.wantSkills(srv.ServerID, reasons("", "a", "b"))
	e.sweepNone()
}

// One miss at a time, however often, never moves a server.
func singleMissNeverUnhealthy(e *env) {
	srv := e.registerNew(e.info("calendar", "a"))
	for range 10 {
		e.advance(10 * time.Second)
		e.sweepNone()
		e.advance(9 * time.Second)
		e.sweepNone()
		if _, ev := e.heartbeat(srv.ServerID); ev != nil {
			e.t.Fatalf("heartbeat from healthy: event %s, want none", ev.Kind)
		}
	}
	e.advance(19900 * time.Millisecond)
	e.sweepNone()
	e.checkServer(e.server(srv.ServerID), srvWant{status: registry.StatusHealthy,
		heartbeat: e.now().Add(-19900 * time.Millisecond), registered: Start})
	e.wantSkills(srv.ServerID, reasons("", "a"))
	e.wantKinds(srv.ServerID, registry.KindRegistered)
}

// The thresholds are inclusive: 2I is degraded, 3I unhealthy.
func exactBoundaries(e *env) {
	a := e.registerNew(e.info("alpha", "a"))
	e.advance(2*Interval - time.Microsecond)
	e.sweepNone()
	e.advance(time.Microsecond) // lag 20 s
	e.checkEvent(e.sweepOne(), evWant{kind: registry.KindDegraded, srv: a, from: registry.StatusHealthy,
		to: registry.StatusDegraded, at: e.now()})
	e.advance(9999 * time.Millisecond) // lag 29.999 s
	e.sweepNone()
	e.wantStatus(a.ServerID, registry.StatusDegraded)
	e.advance(999 * time.Microsecond) // lag 29.999999 s
	e.sweepNone()
	e.advance(time.Microsecond) // lag 30 s
	e.checkEvent(e.sweepOne(), evWant{kind: registry.KindUnhealthy, srv: a, from: registry.StatusDegraded,
		to: registry.StatusUnhealthy, at: e.now(), affected: []string{"a"}})

	// Straight from healthy at exactly 3I: one event, not two.
	b := e.registerNew(e.info("bravo", "b"))
	e.advance(3 * Interval)
	e.checkEvent(e.sweepOne(), evWant{kind: registry.KindUnhealthy, srv: b, from: registry.StatusHealthy,
		to: registry.StatusUnhealthy, at: e.now(), affected: []string{"b"}})
	e.wantKinds(b.ServerID, registry.KindRegistered, registry.KindUnhealthy)
	e.wantKinds(a.ServerID, registry.KindRegistered, registry.KindDegraded, registry.KindUnhealthy)
}

// A degraded server becomes unhealthy on a later sweep.
func degradedThenUnhealthy(e *env) {
	srv := e.registerNew(e.info("calendar", "a", "b"))
	e.advance(20 * time.Second)
	e.sweepOne()
	e.advance(5 * time.Second)
	e.sweepNone()
	e.advance(5 * time.Second)
	ev := e.sweepOne()
	e.checkEvent(ev, evWant{kind: registry.KindUnhealthy, srv: srv, from: registry.StatusDegraded,
		to: registry.StatusUnhealthy, at: e.now(), affected: []string{"a", "b"}})
	e.wantSkills(srv.ServerID, reasons(registry.ReasonServerUnhealthy, "a", "b"))
	e.advance(time.Hour)
	e.sweepNone()
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindDegraded, registry.KindUnhealthy)
}

// A heartbeat from degraded recovers at once, and the lag counts again from it.
func recoveryFromDegraded(e *env) {
	srv := e.registerNew(e.info("calendar", "a"))
	e.advance(25 * time.Second)
	e.sweepOne()
	got, ev := e.heartbeat(srv.ServerID)
	e.checkServer(got, srvWant{status: registry.StatusHealthy, heartbeat: e.now(), registered: Start})
	if ev == nil {
		e.t.Fatalf("heartbeat from degraded: no event, want %s", registry.KindRecovered)
	}
	e.checkEvent(*ev, evWant{kind: registry.KindRecovered, srv: srv, from: registry.StatusDegraded,
		to: registry.StatusHealthy, at: e.now()})
	e.wantLogged(*ev)
	e.wantSkills(srv.ServerID, reasons("", "a"))
	e.advance(19 * time.Second)
	e.sweepNone()
	e.advance(time.Second)
	e.checkEvent(e.sweepOne(), evWant{kind: registry.KindDegraded, srv: srv, from: registry.StatusHealthy,
		to: registry.StatusDegraded, at: e.now()})
}

// A heartbeat from unhealthy recovers with no manual step, and the server
// goes through the whole lifecycle again.
func recoveryFromUnhealthy(e *env) {
	srv := e.registerNew(e.info("calendar", "a", "b"))
	for round := range 3 {
		e.advance(20 * time.Second)
		e.sweepOne()
		e.advance(10 * time.Second)
		e.sweepOne()
		e.wantSkills(srv.ServerID, reasons(registry.ReasonServerUnhealthy, "a", "b"))
		got, ev := e.heartbeat(srv.ServerID)
		if ev == nil || got.Status != registry.StatusHealthy {
			e.t.Fatalf("round %d: heartbeat from unhealthy: status %s, event %v", round, got.Status, ev)
		}
		e.checkEvent(*ev, evWant{kind: registry.KindRecovered, srv: srv, from: registry.StatusUnhealthy,
			to: registry.StatusHealthy, at: e.now(), affected: []string{"a", "b"}})
		e.wantSkills(srv.ServerID, reasons("", "a", "b"))
	}
	k := []registry.EventKind{registry.KindRegistered}
	for range 3 {
		k = append(k, registry.KindDegraded, registry.KindUnhealthy, registry.KindRecovered)
	}
	e.wantKinds(srv.ServerID, k...)
}

// A skill unavailable for a reason of its own stays so through recovery,
// deregistration and re-registration.
func ownReasonSurvivesRecovery(e *env) {
	info := e.info("calendar", "a", "b", "c")
	srv := e.registerNew(info)
	e.disable(srv.ServerID, "c", "maintenance")
	own := reasons("maintenance", "c")

	e.advance(30 * time.Second)
	e.checkEvent(e.sweepOne(), evWant{kind: registry.KindUnhealthy, srv: srv, from: registry.StatusHealthy,
		to: registry.StatusUnhealthy, at: e.now(), affected: []string{"a", "b"}})
	e.heartbeat(srv.ServerID)
	e.wantSkills(srv.ServerID, merge(reasons("", "a", "b"), own))

	// Disabled while degraded: the cascade leaves it out too.
	e.advance(20 * time.Second)
	e.sweepOne()
	e.disable(srv.ServerID, "b", "quota_exceeded")
	own["b"] = "quota_exceeded"
	e.advance(10 * time.Second)
	e.checkEvent(e.sweepOne(), evWant{kind: registry.KindUnhealthy, srv: srv, from: registry.StatusDegraded,
		to: registry.StatusUnhealthy, at: e.now(), affected: []string{"a"}})
	e.wantSkills(srv.ServerID, merge(reasons(registry.ReasonServerUnhealthy, "a"), own))

	_, ev := e.deregister(srv.ServerID)
	e.checkEvent(*ev, evWant{kind: registry.KindDeregistered, srv: srv, from: registry.StatusUnhealthy,
		to: registry.StatusDeregistered, at: e.now(), affected: []string{"a"}})
	e.wantSkills(srv.ServerID, merge(reasons(registry.ReasonServerDeregistered, "a"), own))

	e.advance(time.Minute)
	again, created, rev := e.register(info)
	if created || again.ServerID != srv.ServerID {
		e.t.Fatalf("re-register: created %v, server %s, want false, %s", created, again.ServerID, srv.ServerID)
	}
	e.checkEvent(rev, evWant{kind: registry.KindRegistered, srv: srv, from: registry.StatusDeregistered,
		to: registry.StatusHealthy, at: e.now(), affected: []string{"a", "b", "c"}})
	e.wantSkills(srv.ServerID, merge(reasons("", "a"), own))
}

// Deregistration: the status, the time and the skills.
func deregister(e *env) {
	for _, from := range []registry.Status{registry.StatusHealthy, registry.StatusDegraded, registry.StatusUnhealthy} {
		srv := e.registerNew(e.info("mod-"+string(from), "a", "b"))
		switch from {
		case registry.StatusDegraded:
			e.advance(20 * time.Second)
			e.sweepOne()
		case registry.StatusUnhealthy:
			e.advance(30 * time.Second)
			e.sweepOne()
		}
		e.advance(3 * time.Second)
		got, ev := e.deregister(srv.ServerID)
		e.checkServer(got, srvWant{status: registry.StatusDeregistered, heartbeat: srv.LastHeartbeatAt,
			registered: srv.RegisteredAt, deregistered: e.now()})
		if ev == nil {
			e.t.Fatalf("deregister from %s: no event", from)
		}
		e.checkEvent(*ev, evWant{kind: registry.KindDeregistered, srv: srv, from: from,
			to: registry.StatusDeregistered, at: e.now(), affected: []string{"a", "b"}})
		e.wantLogged(*ev)
		e.checkServer(e.server(srv.ServerID), srvWant{status: registry.StatusDeregistered, heartbeat: srv.LastHeartbeatAt,
			registered: srv.RegisteredAt, deregistered: e.now()})
		e.wantSkills(srv.ServerID, reasons(registry.ReasonServerDeregistered, "a", "b"))
	}
}

// A second deregister answers the same server and writes nothing.
func deregisterIdempotent(e *env) {
	srv := e.registerNew(e.info("calendar", "a"))
	e.advance(time.Second)
	first, ev := e.deregister(srv.ServerID)
	if ev == nil {
		e.t.Fatalf("first deregister: no event")
	}
	at := e.now()
	e.advance(time.Second)
	second, ev2 := e.deregister(srv.ServerID)
	if ev2 != nil {
		e.t.Fatalf("second deregister: event %s, want none", ev2.Kind)
	}
	e.checkServer(second, srvWant{status: registry.StatusDeregistered, heartbeat: Start, registered: Start, deregistered: at})
	if second.ServerID != first.ServerID {
		e.t.Fatalf("second deregister: server %s, want %s", second.ServerID, first.ServerID)
	}
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindDeregistered)
	e.wantSkills(srv.ServerID, reasons(registry.ReasonServerDeregistered, "a"))
}

// A heartbeat from a deregistered server is refused and changes nothing.
func heartbeatAfterDeregister(e *env) {
	srv := e.registerNew(e.info("calendar", "a"))
	e.advance(time.Second)
	e.deregister(srv.ServerID)
	before := e.server(srv.ServerID)
	e.advance(5 * time.Second)
	_, ev, err := e.store.Heartbeat(e.ctx, e.tenant, srv.ServerID)
	if !errors.Is(err, registry.ErrDeregistered) {
		e.t.Fatalf("heartbeat after deregister: err %v, want ErrDeregistered", err)
	}
	if ev != nil {
		e.t.Fatalf("heartbeat after deregister: event %s, want none", ev.Kind)
	}
	after := e.server(srv.ServerID)
	e.checkServer(after, srvWant{status: registry.StatusDeregistered, heartbeat: before.LastHeartbeatAt,
		registered: Start, deregistered: *before.DeregisteredAt})
	e.wantSkills(srv.ServerID, reasons(registry.ReasonServerDeregistered, "a"))
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindDeregistered)
}

// The monitor never moves a deregistered server.
func monitorIgnoresDeregistered(e *env) {
	srv := e.registerNew(e.info("calendar", "a"))
	e.deregister(srv.ServerID)
	for range 3 {
		e.advance(100 * time.Second)
		e.sweepNone()
	}
	e.wantStatus(srv.ServerID, registry.StatusDeregistered)
	e.wantSkills(srv.ServerID, reasons(registry.ReasonServerDeregistered, "a"))
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindDeregistered)
}

// A zero now is the store's clock; any other now is the sweep's time and
// its events'.
func sweepNow(e *env) {
	a := e.registerNew(e.info("alpha"))
	e.advance(35 * time.Second)
	evs := e.sweepAt(time.Time{}, 1000)
	if len(evs) != 1 {
		e.t.Fatalf("sweep at zero now: %d transitions, want 1", len(evs))
	}
	e.checkEvent(evs[0], evWant{kind: registry.KindUnhealthy, srv: a, from: registry.StatusHealthy,
		to: registry.StatusUnhealthy, at: e.now()})

	b := e.registerNew(e.info("bravo"))
	at := e.now().Add(25 * time.Second)
	evs = e.sweepAt(at, 1000)
	if len(evs) != 1 {
		e.t.Fatalf("sweep at now+25s: %d transitions, want 1", len(evs))
	}
	e.checkEvent(evs[0], evWant{kind: registry.KindDegraded, srv: b, from: registry.StatusHealthy,
		to: registry.StatusDegraded, at: at})
	e.wantLogged(evs[0])
	if evs := e.sweepAt(time.Time{}, 1000); len(evs) != 0 {
		e.t.Fatalf("sweep at the clock's now: %s, want none", describe(evs))
	}
}

// A sweep moves at most limit servers; the next sweep moves the rest.
func sweepLimit(e *env) {
	ids := map[string]bool{}
	for _, m := range []string{"a1", "a2", "a3", "a4", "a5"} {
		ids[e.registerNew(e.info(m)).ServerID.String()] = true
	}
	e.advance(35 * time.Second)
	first := e.sweepAt(e.now(), 2)
	if len(first) != 2 {
		e.t.Fatalf("sweep limit 2 with 5 due: %d transitions", len(first))
	}
	rest := e.sweepAt(e.now(), 1000)
	if len(rest) != 3 {
		e.t.Fatalf("second sweep: %d transitions, want the other 3", len(rest))
	}
	for _, ev := range append(first, rest...) {
		if !ids[ev.ServerID.String()] || ev.Kind != registry.KindUnhealthy {
			e.t.Fatalf("sweep: unexpected or repeated transition %s", describe([]registry.Event{ev}))
		}
		delete(ids, ev.ServerID.String())
	}
	e.sweepNone()
	page, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{Status: registry.StatusUnhealthy, Limit: 10})
	if err != nil || len(page.Servers) != 5 {
		e.t.Fatalf("unhealthy servers: %d, %v; want 5", len(page.Servers), err)
	}
}

// A sweep over several tenants moves at most limit servers in all, one
// tenant's as well as several's, and the next sweeps move the rest, each
// server once; a tenant whose servers are alive moves none.
func sweepLimitAcrossTenants(e *env) {
	busy, few, alive := e.tenant, uuid.New(), uuid.New()
	due := map[uuid.UUID]bool{}
	for i := range 5 {
		srv, _, _ := e.registerFor(busy, e.info(fmt.Sprintf("busy-%d", i)))
		due[srv.ServerID] = true
	}
	for i := range 2 {
		srv, _, _ := e.registerFor(few, e.info(fmt.Sprintf("few-%d", i)))
		due[srv.ServerID] = true
	}
	kept, _, _ := e.registerFor(alive, e.info("alive"))
	e.advance(35 * time.Second)
	if _, _, err := e.store.Heartbeat(e.ctx, alive, kept.ServerID); err != nil {
		e.t.Fatalf("heartbeat: %v", err)
	}
	for _, step := range []struct{ limit, want int }{{4, 4}, {2, 2}, {1000, 1}, {1000, 0}} {
		evs := e.sweepAt(e.now(), step.limit)
		if len(evs) != step.want {
			e.t.Fatalf("sweep limit %d: %d transitions, want %d: %s", step.limit, len(evs), step.want, describe(evs))
		}
		for _, ev := range evs {
			if !due[ev.ServerID] || ev.Kind != registry.KindUnhealthy {
				e.t.Fatalf("sweep: unexpected or repeated transition %s", describe([]registry.Event{ev}))
			}
			delete(due, ev.ServerID)
		}
	}
}

// A sweep spans every tenant, and each event carries its own tenant.
func sweepEveryTenant(e *env) {
	tenants := []uuid.UUID{e.tenant, uuid.New(), uuid.New()}
	for _, tn := range tenants {
		e.registerFor(tn, e.info("calendar", "a"))
	}
	e.advance(25 * time.Second)
	evs := e.sweep()
	if len(evs) != 3 {
		e.t.Fatalf("sweep over 3 tenants: %d transitions, want 3", len(evs))
	}
	seen := map[uuid.UUID]bool{}
	for _, ev := range evs {
		seen[ev.TenantID] = true
		trail := e.allEvents(ev.TenantID, registry.EventFilter{Kind: registry.KindDegraded})
		if len(trail) != 1 || trail[0].EventID != ev.EventID {
			e.t.Fatalf("tenant %s: degraded events %s, want the sweep's", ev.TenantID, describe(trail))
		}
	}
	for _, tn := range tenants {
		if !seen[tn] {
			e.t.Fatalf("sweep: no event for tenant %s", tn)
		}
	}
}

// A scripted life: exactly one event per transition, none otherwise.
func oneEventPerTransition(e *env) {
	info := e.info("calendar", "a")
	srv := e.registerNew(info) // registered
	e.heartbeat(srv.ServerID)  // nothing
	e.advance(20 * time.Second)
	e.sweepOne() // degraded
	e.sweepNone()
	e.advance(10 * time.Second)
	e.sweepOne() // unhealthy
	e.advance(10 * time.Second)
	e.sweepNone()
	e.heartbeat(srv.ServerID) // recovered
	e.heartbeat(srv.ServerID) // nothing
	e.register(info)          // registered (healthy -> healthy)
	e.advance(35 * time.Second)
	e.sweepOne()               // unhealthy, straight from healthy
	e.deregister(srv.ServerID) // deregistered
	e.deregister(srv.ServerID) // nothing
	e.advance(35 * time.Second)
	e.sweepNone()
	e.register(info)          // registered (deregistered -> healthy)
	e.heartbeat(srv.ServerID) // nothing
	type step struct {
		kind     registry.EventKind
		from, to registry.Status
	}
	want := []step{
		{registry.KindRegistered, "", registry.StatusHealthy},
		{registry.KindDegraded, registry.StatusHealthy, registry.StatusDegraded},
		{registry.KindUnhealthy, registry.StatusDegraded, registry.StatusUnhealthy},
		{registry.KindRecovered, registry.StatusUnhealthy, registry.StatusHealthy},
		{registry.KindRegistered, registry.StatusHealthy, registry.StatusHealthy},
		{registry.KindUnhealthy, registry.StatusHealthy, registry.StatusUnhealthy},
		{registry.KindDeregistered, registry.StatusUnhealthy, registry.StatusDeregistered},
		{registry.KindRegistered, registry.StatusDeregistered, registry.StatusHealthy},
	}
	evs := e.allEvents(e.tenant, registry.EventFilter{})
	got := make([]step, len(evs))
	for i, ev := range evs {
		got[i] = step{kind: ev.Kind, to: ev.ToStatus}
		if ev.FromStatus != nil {
			got[i].from = *ev.FromStatus
		}
	}
	if len(got) != len(want) {
		e.t.Fatalf("events: %d, want %d: %s", len(got), len(want), describe(evs))
	}
	for i := range want {
		if got[i] != want[i] {
			e.t.Fatalf("event %d: %+v, want %+v (all: %s)", i, got[i], want[i], describe(evs))
		}
	}
	counts := map[registry.EventKind]int{}
	for _, k := range registry.EventKinds {
		page, err := e.store.Events(e.ctx, e.tenant, registry.EventFilter{Kind: k, Limit: 100})
		if err != nil {
			e.t.Fatalf("events of kind %s: %v", k, err)
		}
		counts[k] = len(page.Events)
	}
	wantCounts := map[registry.EventKind]int{registry.KindRegistered: 3, registry.KindDegraded: 1,
		registry.KindUnhealthy: 2, registry.KindRecovered: 1, registry.KindDeregistered: 1}
	for _, k := range registry.EventKinds {
		if counts[k] != wantCounts[k] {
			e.t.Fatalf("events by kind: %v, want %v", counts, wantCounts)
		}
	}
}

// A store that counts servers per status counts every tenant's.
func countByStatus(e *env) {
	counter := e.store
	other := uuid.New()
	for _, m := range []string{"a", "b", "c", "d"} {
		e.registerNew(e.info(m))
		e.registerFor(other, e.info(m))
	}
	e.advance(20 * time.Second)
	hb := func(tn uuid.UUID, module string) uuid.UUID {
		page, err := e.store.Servers(e.ctx, tn, registry.ServerFilter{ModuleName: module, Limit: 1})
		if err != nil || len(page.Servers) != 1 {
			e.t.Fatalf("server %q: %v", module, err)
		}
		id := page.Servers[0].ServerID
		if _, _, err := e.store.Heartbeat(e.ctx, tn, id); err != nil {
			e.t.Fatalf("heartbeat %q: %v", module, err)
		}
		return id
	}
	hb(e.tenant, "a")
	hb(other, "a")
	hb(other, "b")
	e.sweep() // 5 degraded
	e.advance(10 * time.Second)
	hb(e.tenant, "a")
	hb(other, "a")
	hb(other, "b")
	hb(e.tenant, "b")
	e.sweep() // c, d of e.tenant and c, d of other unhealthy
	if _, _, err := e.store.Deregister(e.ctx, other, hb(other, "a")); err != nil {
		e.t.Fatal(err)
	}
	got, err := counter.CountByStatus(e.ctx)
	if err != nil {
		e.t.Fatalf("count by status: %v", err)
	}
	want := map[registry.Status]int64{registry.StatusHealthy: 3, registry.StatusUnhealthy: 4, registry.StatusDeregistered: 1}
	for _, st := range registry.Statuses {
		if got[st] != want[st] {
			e.t.Fatalf("count by status: %v, want %v", got, want)
		}
	}
}
