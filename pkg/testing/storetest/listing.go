package storetest

import (
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// The listings of servers and of the audit trail.
var listingCases = []testCase{
	{"servers_listing", serversListing},
	{"servers_paging", serversPaging},
	{"events_listing", eventsListing},
	{"events_paging", eventsPaging},
}

// fleet registers five servers, one per status but healthy twice:
// alpha, bravo healthy, charlie deregistered, delta degraded, echo unhealthy.
func (e *env) fleet() map[string]registry.Server {
	e.t.Helper()
	byName := map[string]registry.Server{}
	for _, m := range []string{"echo", "alpha", "charlie", "bravo"} {
		byName[m] = e.registerNew(e.info(m, "s"))
	}
	e.advance(10 * time.Second)
	byName["delta"] = e.registerNew(e.info("delta", "s"))
	e.advance(20 * time.Second)
	e.heartbeat(byName["alpha"].ServerID)
	e.heartbeat(byName["bravo"].ServerID)
	if evs := e.sweep(); len(evs) != 3 {
		e.t.Fatalf("fleet sweep: %s, want charlie, echo unhealthy and delta degraded", describe(evs))
	}
	e.deregister(byName["charlie"].ServerID)
	return byName
}

func (e *env) modules(f registry.ServerFilter) []string {
	e.t.Helper()
	page, err := e.store.Servers(e.ctx, e.tenant, f)
	if err != nil {
		e.t.Fatalf("servers %+v: %v", f, err)
	}
	names := []string{}
	for _, s := range page.Servers {
		names = append(names, s.ModuleName)
	}
	if page.Next != nil {
		names = append(names, "(next)")
	}
	return names
}

// Servers come ordered by module name and filter by status and module.
func serversListing(e *env) {
	byName := e.fleet()
	cases := []struct {
		f    registry.ServerFilter
		want []string
	}{
		{registry.ServerFilter{Limit: 100}, []string{"alpha", "bravo", "charlie", "delta", "echo"}},
		{registry.ServerFilter{Status: registry.StatusHealthy, Limit: 100}, []string{"alpha", "bravo"}},
		{registry.ServerFilter{Status: registry.StatusDegraded, Limit: 100}, []string{"delta"}},
		{registry.ServerFilter{Status: registry.StatusUnhealthy, Limit: 100}, []string{"echo"}},
		{registry.ServerFilter{Status: registry.StatusDeregistered, Limit: 100}, []string{"charlie"}},
		{registry.ServerFilter{ModuleName: "delta", Limit: 100}, []string{"delta"}},
		{registry.ServerFilter{ModuleName: "delt", Limit: 100}, []string{}},
		{registry.ServerFilter{ModuleName: "delta", Status: registry.StatusDegraded, Limit: 100}, []string{"delta"}},
		{registry.ServerFilter{ModuleName: "delta", Status: registry.StatusHealthy, Limit: 100}, []string{}},
	}
	for _, c := range cases {
		if got := e.modules(c.f); !slices.Equal(got, c.want) {
			e.t.Fatalf("servers %+v: %v, want %v", c.f, got, c.want)
		}
	}
	// A listed server is the whole server.
	page, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range page.Servers {
		if want := e.server(byName[s.ModuleName].ServerID); !jsonEqual(mustJSON(e, s), mustJSON(e, want)) {
			e.t.Fatalf("listed server differs from Server:\n %s\n %s", mustJSON(e, s), mustJSON(e, want))
		}
		if s.TenantID != e.tenant {
			e.t.Fatalf("listed server %q: tenant %s", s.ModuleName, s.TenantID)
		}
	}
}

// Server pages follow the cursor; the last page has none.
func serversPaging(e *env) {
	e.fleet()
	walk := e.walkAll
	cases := []struct {
		f    registry.ServerFilter
		want [][]string
	}{
		{registry.ServerFilter{Limit: 2}, [][]string{{"alpha", "bravo"}, {"charlie", "delta"}, {"echo"}}},
		{registry.ServerFilter{Limit: 5}, [][]string{{"alpha", "bravo", "charlie", "delta", "echo"}}},
		{registry.ServerFilter{Limit: 1000}, [][]string{{"alpha", "bravo", "charlie", "delta", "echo"}}},
		{registry.ServerFilter{Limit: 1}, [][]string{{"alpha"}, {"bravo"}, {"charlie"}, {"delta"}, {"echo"}}},
		{registry.ServerFilter{Status: registry.StatusHealthy, Limit: 1}, [][]string{{"alpha"}, {"bravo"}}},
		{registry.ServerFilter{Status: registry.StatusUnhealthy, Limit: 1}, [][]string{{"echo"}}},
	}
	for _, c := range cases {
		if got := walk(c.f); !slices.EqualFunc(got, c.want, slices.Equal) {
			e.t.Fatalf("pages of %+v: %v, want %v", c.f, got, c.want)
		}
	}
	// A server registered after the cursor's position shows up on a later page.
	page, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{Limit: 2})
	if err != nil || page.Next == nil {
		e.t.Fatalf("servers: next %v, %v", page.Next, err)
	}
	e.registerNew(e.info("bravo-2"))
	e.registerNew(e.info("aardvark"))
	if got := walk(registry.ServerFilter{Limit: 2, After: page.Next}); !slices.EqualFunc(got,
		[][]string{{"bravo-2", "charlie"}, {"delta", "echo"}}, slices.Equal) {
		e.t.Fatalf("pages after bravo: %v", got)
	}
}

// The audit trail is oldest first and filters by server and by kind.
func eventsListing(e *env) {
	a := e.registerNew(e.info("alpha", "s"))
	b := e.registerNew(e.info("bravo", "s"))
	e.advance(20 * time.Second)
	e.heartbeat(a.ServerID)
	e.sweepOne() // bravo degraded
	e.advance(10 * time.Second)
	e.sweepOne()                     // bravo unhealthy
	e.heartbeat(b.ServerID)          // bravo recovered
	e.deregister(a.ServerID)         // alpha deregistered
	e.register(e.info("alpha", "s")) // alpha registered again

	all := e.allEvents(e.tenant, registry.EventFilter{Limit: 100})
	type row struct {
		module string
		kind   registry.EventKind
	}
	want := []row{
		{"alpha", registry.KindRegistered}, {"bravo", registry.KindRegistered},
		{"bravo", registry.KindDegraded}, {"bravo", registry.KindUnhealthy}, {"bravo", registry.KindRecovered},
		{"alpha", registry.KindDeregistered}, {"alpha", registry.KindRegistered},
	}
	got := make([]row, len(all))
	for i, ev := range all {
		got[i] = row{ev.ModuleName, ev.Kind}
		if ev.Seq <= 0 {
			e.t.Fatalf("event %d: seq %d, want positive", i, ev.Seq)
		}
		if ev.TenantID != e.tenant {
			e.t.Fatalf("event %d: tenant %s", i, ev.TenantID)
		}
	}
	if !slices.Equal(got, want) {
		e.t.Fatalf("events:\n got  %v\n want %v", got, want)
	}

	filter := func(f registry.EventFilter) []registry.Event {
		e.t.Helper()
		var out []registry.Event
		for _, ev := range all {
			if (f.ServerID == nil || ev.ServerID == *f.ServerID) && (f.Kind == "" || ev.Kind == f.Kind) {
				out = append(out, ev)
			}
		}
		return out
	}
	for _, f := range []registry.EventFilter{
		{ServerID: &a.ServerID}, {ServerID: &b.ServerID},
		{Kind: registry.KindRegistered}, {Kind: registry.KindUnhealthy}, {Kind: registry.KindDeregistered},
		{ServerID: &a.ServerID, Kind: registry.KindRegistered}, {ServerID: &b.ServerID, Kind: registry.KindDeregistered},
	} {
		gotF := e.allEvents(e.tenant, f)
		wantF := filter(f)
		if len(gotF) != len(wantF) {
			e.t.Fatalf("events %+v: %s, want %s", f, describe(gotF), describe(wantF))
		}
		for i := range wantF {
			if err := sameEvent(gotF[i], wantF[i]); err != nil || gotF[i].Seq != wantF[i].Seq {
				e.t.Fatalf("events %+v, #%d: %v", f, i, err)
			}
		}
	}
}

// Event pages follow the sequence; the last page has no next.
func eventsPaging(e *env) {
	srv := e.registerNew(e.info("alpha", "s"))
	for range 4 {
		e.advance(30 * time.Second)
		e.sweepOne()
		e.heartbeat(srv.ServerID)
	}
	// 9 events: registered, then 4 x (unhealthy, recovered).
	all := e.allEvents(e.tenant, registry.EventFilter{Limit: 1000})
	if len(all) != 9 {
		e.t.Fatalf("events: %d, want 9", len(all))
	}
	for _, limit := range []int{1, 2, 3, 4, 8, 9, 10} {
		var got []registry.Event
		f := registry.EventFilter{Limit: limit}
		pages := 0
		for {
			page, err := e.store.Events(e.ctx, e.tenant, f)
			if err != nil {
				e.t.Fatalf("events limit %d: %v", limit, err)
			}
			pages++
			if len(page.Events) > limit || pages > 20 {
				e.t.Fatalf("events limit %d: page %d has %d", limit, pages, len(page.Events))
			}
			got = append(got, page.Events...)
			if page.Next == nil {
				break
			}
			f.After = *page.Next
		}
		if wantPages := (9 + limit - 1) / limit; pages != wantPages {
			e.t.Fatalf("events limit %d: %d pages, want %d (no next on the last page)", limit, pages, wantPages)
		}
		if len(got) != len(all) {
			e.t.Fatalf("events limit %d: %d, want %d", limit, len(got), len(all))
		}
		for i := range all {
			if got[i].EventID != all[i].EventID {
				e.t.Fatalf("events limit %d: #%d differs", limit, i)
			}
		}
	}
	// Paging with a filter.
	f := registry.EventFilter{ServerID: &srv.ServerID, Kind: registry.KindRecovered, Limit: 3}
	page, err := e.store.Events(e.ctx, e.tenant, f)
	if err != nil || len(page.Events) != 3 || page.Next == nil {
		e.t.Fatalf("recovered events, limit 3: %d, next %v, %v", len(page.Events), page.Next, err)
	}
	f.After = *page.Next
	page, err = e.store.Events(e.ctx, e.tenant, f)
	if err != nil || len(page.Events) != 1 || page.Next != nil || page.Events[0].EventID != all[8].EventID {
		e.t.Fatalf("recovered events, second page: %d, next %v, %v", len(page.Events), page.Next, err)
	}
	// After the last event: nothing.
	other := uuid.New()
	f = registry.EventFilter{After: all[8].Position, Limit: 10}
	if page, err := e.store.Events(e.ctx, e.tenant, f); err != nil || len(page.Events) != 0 || page.Next != nil {
		e.t.Fatalf("events after the last: %d, %v", len(page.Events), err)
	}
	if page, err := e.store.Events(e.ctx, e.tenant, registry.EventFilter{ServerID: &other, Limit: 10}); err != nil || len(page.Events) != 0 {
		e.t.Fatalf("events of an unknown server: %d, %v", len(page.Events), err)
	}
}
