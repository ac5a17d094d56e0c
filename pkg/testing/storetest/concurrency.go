package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// What must hold when calls race (run the suite under -race).
var concurrencyCases = []testCase{
	{"concurrent_heartbeats", concurrentHeartbeats},
	{"heartbeat_races_sweep", heartbeatRacesSweep},
	{"concurrent_sweepers", concurrentSweepers},
	{"concurrent_heartbeats_across_tenants", concurrentHeartbeatsAcrossTenants},
}

// run starts n goroutines at once and waits for them all.
func run(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}

// 50 heartbeats at once for an unhealthy server: all succeed and exactly one
// of them recovers it.
func concurrentHeartbeats(e *env) {
	srv := e.registerNew(e.info("calendar", "a", "b"))
	e.advance(35 * time.Second)
	e.sweepOne()
	e.advance(time.Second)

	const n = 50
	servers := make([]registry.Server, n)
	events := make([]*registry.Event, n)
	errs := make([]error, n)
	run(n, func(i int) {
		servers[i], events[i], errs[i] = e.store.Heartbeat(e.ctx, e.tenant, srv.ServerID)
	})
	var recovered []registry.Event
	for i := range n {
		if errs[i] != nil {
			e.t.Fatalf("heartbeat %d: %v", i, errs[i])
		}
		if servers[i].Status != registry.StatusHealthy {
			e.t.Fatalf("heartbeat %d: status %s, want healthy", i, servers[i].Status)
		}
		if events[i] != nil {
			recovered = append(recovered, *events[i])
		}
	}
	if len(recovered) != 1 {
		e.t.Fatalf("50 concurrent heartbeats: %d recovered events returned, want 1: %s", len(recovered), describe(recovered))
	}
	e.checkEvent(recovered[0], evWant{kind: registry.KindRecovered, srv: srv, from: registry.StatusUnhealthy,
		to: registry.StatusHealthy, at: e.now(), affected: []string{"a", "b"}})
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindUnhealthy, registry.KindRecovered)
	e.wantSkills(srv.ServerID, reasons("", "a", "b"))

	// And from healthy: no event at all.
	run(n, func(i int) {
		servers[i], events[i], errs[i] = e.store.Heartbeat(e.ctx, e.tenant, srv.ServerID)
	})
	for i := range n {
		if errs[i] != nil || events[i] != nil {
			e.t.Fatalf("heartbeat %d from healthy: event %v, err %v", i, events[i], errs[i])
		}
	}
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindUnhealthy, registry.KindRecovered)
}

// Heartbeats race a sweep for servers exactly at the thresholds. Each server
// either is moved by the sweep and then recovered by its heartbeat (both
// events), or its heartbeat comes first and nothing moves (no event): never
// a lost or a duplicate event. Several rounds, the sweep started at a
// different place among the heartbeats each time.
func heartbeatRacesSweep(e *env) {
	const rounds, perGroup = 4, 10
	var earlier []registry.Server
	movedTotal := 0
	for round := range rounds {
		var servers []registry.Server
		for i := range perGroup { // lag 30 s at the race: the unhealthy threshold
			servers = append(servers, e.registerNew(e.info(fmt.Sprintf("r%d-u%02d", round, i), "s")))
		}
		e.advance(10 * time.Second)
		for i := range perGroup { // lag 20 s at the race: the degraded threshold
			servers = append(servers, e.registerNew(e.info(fmt.Sprintf("r%d-d%02d", round, i), "s")))
		}
		e.advance(20 * time.Second)
		for _, srv := range earlier { // out of this round's way
			if _, ev := e.heartbeat(srv.ServerID); ev != nil {
				e.t.Fatalf("%s: heartbeat from healthy wrote %s", srv.ModuleName, ev.Kind)
			}
		}
		movedTotal += e.raceRound(servers, perGroup, round*len(servers)/rounds)
		earlier = append(earlier, servers...)
	}
	e.t.Logf("heartbeat_races_sweep: the sweep came first for %d of %d servers", movedTotal, rounds*2*perGroup)
	e.sweepNone()
}

// raceRound races a heartbeat for each of servers against one sweep, which
// starts as goroutine sweepAt; the first unhealthy servers are at the
// unhealthy threshold, the rest at the degraded one. It returns how many the
// sweep moved.
func (e *env) raceRound(servers []registry.Server, unhealthy, sweepAt int) int {
	e.t.Helper()
	now := e.now()
	n := len(servers)
	hbEvents := make([]*registry.Event, n)
	hbErrs := make([]error, n)
	var swept []registry.Event
	var sweepErr error
	run(n+1, func(i int) {
		switch {
		case i == sweepAt:
			var result store.SweepResult
			result, sweepErr = e.store.Sweep(e.ctx, store.SweepRequest{Now: now, Interval: Interval, Limit: 1000})
			swept = result.Events
		case i > sweepAt:
			i--
			fallthrough
		default:
			_, hbEvents[i], hbErrs[i] = e.store.Heartbeat(e.ctx, e.tenant, servers[i].ServerID)
		}
	})
	if sweepErr != nil {
		e.t.Fatalf("sweep: %v", sweepErr)
	}
	moved := map[uuid.UUID]registry.Event{}
	for _, ev := range swept {
		if _, dup := moved[ev.ServerID]; dup {
			e.t.Fatalf("sweep moved %s twice", ev.ModuleName)
		}
		moved[ev.ServerID] = ev
	}
	movedCount := 0
	for i, srv := range servers {
		if hbErrs[i] != nil {
			e.t.Fatalf("heartbeat %s: %v", srv.ModuleName, hbErrs[i])
		}
		wantTo, wantKind, affected := registry.StatusUnhealthy, registry.KindUnhealthy, []string{"s"}
		if i >= unhealthy {
			wantTo, wantKind, affected = registry.StatusDegraded, registry.KindDegraded, nil
		}
		sw, wasMoved := moved[srv.ServerID]
		switch {
		case wasMoved && hbEvents[i] == nil:
			e.t.Fatalf("%s: swept to %s but its heartbeat recovered nothing", srv.ModuleName, sw.ToStatus)
		case !wasMoved && hbEvents[i] != nil:
			e.t.Fatalf("%s: heartbeat wrote %s though the sweep did not move it", srv.ModuleName, hbEvents[i].Kind)
		case wasMoved:
			movedCount++
			e.checkEvent(sw, evWant{kind: wantKind, srv: srv, from: registry.StatusHealthy, to: wantTo, at: now, affected: affected})
			e.checkEvent(*hbEvents[i], evWant{kind: registry.KindRecovered, srv: srv, from: wantTo,
				to: registry.StatusHealthy, at: now, affected: affected})
			e.wantKinds(srv.ServerID, registry.KindRegistered, wantKind, registry.KindRecovered)
		default:
			e.wantKinds(srv.ServerID, registry.KindRegistered)
		}
		e.checkServer(e.server(srv.ServerID), srvWant{status: registry.StatusHealthy, heartbeat: now, registered: srv.RegisteredAt})
		e.wantSkills(srv.ServerID, reasons("", "s"))
	}
	if movedCount != len(swept) {
		e.t.Fatalf("sweep returned %d events, %d of them for this round's servers", len(swept), movedCount)
	}
	return movedCount
}

// Three sweepers at once over 100 due servers: each server is moved and
// audited exactly once.
func concurrentSweepers(e *env) {
	const tenants, perTenant = 4, 25
	ids := map[uuid.UUID]uuid.UUID{} // server to tenant
	tenantIDs := []uuid.UUID{e.tenant}
	for range tenants - 1 {
		tenantIDs = append(tenantIDs, uuid.New())
	}
	for _, tn := range tenantIDs {
		for i := range perTenant {
			srv, _, _ := e.registerFor(tn, e.info(fmt.Sprintf("m%02d", i), "s"))
			ids[srv.ServerID] = tn
		}
	}
	e.advance(35 * time.Second)
	now := e.now()

	const sweepers, batch = 3, 7
	results := make([][]registry.Event, sweepers)
	errs := make([]error, sweepers)
	run(sweepers, func(i int) {
		for range 100 {
			result, err := e.store.Sweep(e.ctx, store.SweepRequest{Now: now, Interval: Interval, Limit: batch})
			evs := result.Events
			if err != nil {
				errs[i] = err
				return
			}
			results[i] = append(results[i], evs...)
			if len(evs) == 0 {
				return
			}
		}
	})
	var all []registry.Event
	for i := range sweepers {
		if errs[i] != nil {
			e.t.Fatalf("sweeper %d: %v", i, errs[i])
		}
		all = append(all, results[i]...)
	}
	// Whatever rows a sweeper skipped because another held them are moved by
	// a last sweep; it must find nothing a sweeper already moved.
	for range 100 {
		evs := e.sweepAt(now, batch)
		all = append(all, evs...)
		if len(evs) == 0 {
			break
		}
	}
	seen := map[uuid.UUID]bool{}
	for _, ev := range all {
		tn, ok := ids[ev.ServerID]
		if !ok {
			e.t.Fatalf("sweep moved a server not ours: %s", ev.ServerID)
		}
		if seen[ev.ServerID] {
			e.t.Fatalf("server %s of tenant %s moved twice", ev.ModuleName, tn)
		}
		seen[ev.ServerID] = true
		if ev.TenantID != tn || ev.Kind != registry.KindUnhealthy {
			e.t.Fatalf("server %s: event %s of tenant %s, want unhealthy of %s", ev.ModuleName, ev.Kind, ev.TenantID, tn)
		}
	}
	if len(seen) != len(ids) {
		e.t.Fatalf("three sweepers moved %d of %d due servers", len(seen), len(ids))
	}
	for _, tn := range tenantIDs {
		trail := e.allEvents(tn, registry.EventFilter{Kind: registry.KindUnhealthy, Limit: 1000})
		if len(trail) != perTenant {
			e.t.Fatalf("tenant %s: %d unhealthy events, want %d", tn, len(trail), perTenant)
		}
		page, err := e.store.Servers(e.ctx, tn, registry.ServerFilter{Status: registry.StatusUnhealthy, Limit: 1000})
		if err != nil || len(page.Servers) != perTenant {
			e.t.Fatalf("tenant %s: %d unhealthy servers, %v; want %d", tn, len(page.Servers), err, perTenant)
		}
	}
	e.t.Logf("concurrent_sweepers: moved per sweeper %d, %d, %d", len(results[0]), len(results[1]), len(results[2]))
}

// Heartbeats of many tenants at once, as a store that batches them across
// tenants sees them: each unhealthy server is recovered exactly once, by its
// own tenant, with its own skills back; the same server id named by another
// tenant at the same moment is not found and changes nothing.
func concurrentHeartbeatsAcrossTenants(e *env) {
	const tenants, perTenant = 4, 10
	type owned struct {
		srv    registry.Server
		tenant uuid.UUID
	}
	tenantIDs := []uuid.UUID{e.tenant}
	for range tenants - 1 {
		tenantIDs = append(tenantIDs, uuid.New())
	}
	var servers []owned
	for _, tn := range tenantIDs {
		for i := range perTenant {
			srv, _, _ := e.registerFor(tn, e.info(fmt.Sprintf("m%02d", i), "s"))
			servers = append(servers, owned{srv, tn})
		}
	}
	e.advance(35 * time.Second)
	for range 100 {
		if len(e.sweepAt(e.now(), 100)) == 0 {
			break
		}
	}
	e.advance(time.Second)

	// The first half of the servers: two heartbeats of their tenant and one
	// of the next tenant, all at once. The second half: only a heartbeat of
	// the next tenant, which must leave them unhealthy.
	n := len(servers) / 2
	live, dead := servers[:n], servers[n:]
	events := make([]*registry.Event, 4*n)
	errs := make([]error, 4*n)
	got := make([]registry.Server, 4*n)
	target := func(i int) owned {
		if i >= 3*n {
			return dead[i-3*n]
		}
		return live[i%n]
	}
	run(4*n, func(i int) {
		o := target(i)
		tenant := o.tenant
		if i >= 2*n {
			tenant = tenantIDs[(slices.Index(tenantIDs, o.tenant)+1)%tenants]
		}
		got[i], events[i], errs[i] = e.store.Heartbeat(e.ctx, tenant, o.srv.ServerID)
	})
	recovered := map[uuid.UUID]int{}
	for i := range 4 * n {
		o := target(i)
		if i >= 2*n {
			if !errors.Is(errs[i], registry.ErrNotFound) || events[i] != nil {
				e.t.Fatalf("heartbeat of %s by another tenant: event %v, err %v; want ErrNotFound", o.srv.ModuleName, events[i], errs[i])
			}
			continue
		}
		if errs[i] != nil {
			e.t.Fatalf("heartbeat of %s by its tenant: %v", o.srv.ModuleName, errs[i])
		}
		if got[i].ServerID != o.srv.ServerID || got[i].TenantID != o.tenant || got[i].Status != registry.StatusHealthy {
			e.t.Fatalf("heartbeat of %s: server %s tenant %s status %s", o.srv.ModuleName, got[i].ServerID, got[i].TenantID, got[i].Status)
		}
		if ev := events[i]; ev != nil {
			recovered[o.srv.ServerID]++
			if err := checkEvent(*ev, o.tenant, evWant{kind: registry.KindRecovered, srv: o.srv,
				from: registry.StatusUnhealthy, to: registry.StatusHealthy, at: e.now(), affected: []string{"s"}}); err != nil {
				e.t.Fatalf("recovery of %s of tenant %s: %v", o.srv.ModuleName, o.tenant, err)
			}
		}
	}
	for _, o := range dead {
		srv, err := e.store.Server(e.ctx, o.tenant, o.srv.ServerID)
		if err != nil || srv.Status != registry.StatusUnhealthy {
			e.t.Fatalf("server %s heartbeated only by another tenant: %+v, %v; want unhealthy", o.srv.ModuleName, srv, err)
		}
		skills, err := e.store.Skills(e.ctx, o.tenant, o.srv.ServerID)
		if err != nil || len(skills) != 1 || skills[0].Available {
			e.t.Fatalf("skills of %s heartbeated only by another tenant: %+v, %v", o.srv.ModuleName, skills, err)
		}
	}
	for _, o := range live {
		if recovered[o.srv.ServerID] != 1 {
			e.t.Fatalf("server %s of tenant %s: %d recoveries returned, want 1", o.srv.ModuleName, o.tenant, recovered[o.srv.ServerID])
		}
		srv, err := e.store.Server(e.ctx, o.tenant, o.srv.ServerID)
		if err != nil || srv.Status != registry.StatusHealthy || !srv.LastHeartbeatAt.Equal(e.now()) {
			e.t.Fatalf("server %s after the heartbeats: %+v, %v", o.srv.ModuleName, srv, err)
		}
		skills, err := e.store.Skills(e.ctx, o.tenant, o.srv.ServerID)
		if err != nil || len(skills) != 1 || !skills[0].Available {
			e.t.Fatalf("skills of %s after recovery: %+v, %v", o.srv.ModuleName, skills, err)
		}
	}
}
