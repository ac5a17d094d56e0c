package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// The change feed's positions and skill discovery.
var feedCases = []testCase{
	{"feed_reads_each_tenant_in_commit_order", feedReadsEveryTenant},
	{"feed_positions_checked", feedPositionsChecked},
	{"list_then_watch_has_no_gap", listThenWatchNoGap},
	{"concurrent_commits_never_skipped", concurrentCommitsNeverSkipped},
	{"events_filter_by_module", eventsFilterByModule},
	{"find_skills", findSkills},
}

// readAllFeed reads tenant's feed after from in reads of limit until it
// has want events (or, with want 0, until a read comes back short).
func (e *env) readAllFeed(tenant uuid.UUID, from registry.Position, limit, want int) ([]registry.Event, registry.Position) {
	e.t.Helper()
	var out []registry.Event
	pos := from
	deadline := time.Now().Add(10 * time.Second)
	for range 100_000 {
		bs, err := e.store.ReadFeed(e.ctx, []uuid.UUID{tenant}, []registry.Position{pos}, limit)
		if err != nil {
			e.t.Fatalf("read feed after %+v: %v", pos, err)
		}
		if len(bs) != 1 || bs[0].Tenant != tenant {
			e.t.Fatalf("read feed of one tenant: %d batches", len(bs))
		}
		b := bs[0]
		if len(b.Events) > limit {
			e.t.Fatalf("read feed: %d events, limit %d", len(b.Events), limit)
		}
		for _, ev := range b.Events {
			if ev.Position.Compare(pos) <= 0 || ev.TenantID != tenant {
				e.t.Fatalf("read feed after %+v: event of %s at %+v", pos, ev.TenantID, ev.Position)
			}
			pos = ev.Position
		}
		out = append(out, b.Events...)
		if len(b.Events) < limit {
			pos = pos.Max(b.Horizon)
			if len(out) >= want {
				return out, pos
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("read feed: %d events in 10s, want %d", len(out), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	e.t.Fatalf("read feed: no end after 100000 reads")
	return nil, registry.Position{}
}

// The feed returns each tenant's events once, in the order of its
// positions 1, 2, 3, … without gaps; after the tenant's horizon nothing is
// left; one read serves several tenants, each after its own position.
func feedReadsEveryTenant(e *env) {
	other := uuid.New()
	start, err := e.store.Horizon(e.ctx, e.tenant)
	if err != nil {
		e.t.Fatal(err)
	}
	if start.Seq != 0 || start.TxID != 0 {
		e.t.Fatalf("a new tenant's horizon: %+v, want position 0", start)
	}
	a := e.registerNew(e.info("alpha", "s"))
	e.registerFor(other, e.info("alpha"))
	e.advance(30 * time.Second)
	e.sweep()
	e.heartbeat(a.ServerID)
	e.deregister(a.ServerID)

	for _, limit := range []int{1, 2, 100} {
		// alpha: registered, unhealthy, recovered, deregistered; other:
		// registered, unhealthy (the sweep spans tenants).
		mine, horizon := e.readAllFeed(e.tenant, start, limit, 4)
		theirs, _ := e.readAllFeed(other, registry.Position{}, limit, 2)
		if len(mine) != 4 || len(theirs) != 2 {
			e.t.Fatalf("limit %d: %d events of the tenant, %d of the other, want 4, 2", limit, len(mine), len(theirs))
		}
		for i, ev := range mine {
			if ev.Position.Seq != int64(i+1) || ev.Position.TxID != 0 {
				e.t.Fatalf("limit %d: event %d at %+v, want position %d", limit, i, ev.Position, i+1)
			}
		}
		if horizon.Seq != 4 {
			e.t.Fatalf("limit %d: horizon %+v, want position 4", limit, horizon)
		}
		if rest, _ := e.readAllFeed(e.tenant, horizon, limit, 0); len(rest) != 0 {
			e.t.Fatalf("limit %d: %d events after the horizon", limit, len(rest))
		}
	}
	// One read of both tenants, each after its own position.
	bs, err := e.store.ReadFeed(e.ctx, []uuid.UUID{other, e.tenant}, []registry.Position{{}, {Epoch: start.Epoch, Seq: 2}}, 100)
	if err != nil || len(bs) != 2 {
		e.t.Fatalf("read of two tenants: %d batches, %v", len(bs), err)
	}
	if bs[0].Tenant != other || len(bs[0].Events) != 2 || bs[1].Tenant != e.tenant || len(bs[1].Events) != 2 ||
		bs[1].Events[0].Kind != registry.KindRecovered || bs[1].Horizon.Seq != 4 || bs[0].Horizon.Seq != 2 {
		e.t.Fatalf("read of two tenants: %+v", bs)
	}
	// The trail of the tenant is the feed's events of the tenant, in order.
	trail := e.allEvents(e.tenant, registry.EventFilter{})
	feed, _ := e.readAllFeed(e.tenant, start, 100, 4)
	for j, ev := range feed {
		if ev.EventID != trail[j].EventID || ev.Position != trail[j].Position {
			e.t.Fatalf("feed event %d of the tenant is %s at %+v, trail has %s at %+v",
				j, ev.EventID, ev.Position, trail[j].EventID, trail[j].Position)
		}
	}
}

// A position that the store handed out is accepted; one of another epoch,
// ahead of the tenant's present, or of the format of transaction ids is
// expired (the API answers 410), for the audit list too.
func feedPositionsChecked(e *env) {
	e.registerNew(e.info("alpha"))
	ev := e.allEvents(e.tenant, registry.EventFilter{})[0]
	horizon, err := e.store.Horizon(e.ctx, e.tenant)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range []registry.Position{{}, ev.Position, horizon} {
		got, err := e.store.CheckPosition(e.ctx, e.tenant, p)
		if err != nil || got != p {
			e.t.Fatalf("check %+v: %+v, %v", p, got, err)
		}
	}
	for _, p := range []registry.Position{
		{Epoch: horizon.Epoch + 1, Seq: horizon.Seq},  // another history
		{Epoch: horizon.Epoch, Seq: horizon.Seq + 1},  // ahead of the present
		{Epoch: horizon.Epoch, TxID: 1 << 20, Seq: 5}, // a transaction-id position (format 1)
		{Epoch: horizon.Epoch, TxID: 1 << 20},         // its horizon
	} {
		if _, err := e.store.CheckPosition(e.ctx, e.tenant, p); !errors.Is(err, registry.ErrPositionExpired) {
			e.t.Fatalf("check %+v: %v, want ErrPositionExpired", p, err)
		}
	}
	// Another tenant's trail is its own: this tenant's position 1 is ahead
	// of a tenant without events.
	if _, err := e.store.CheckPosition(e.ctx, uuid.New(), ev.Position); !errors.Is(err, registry.ErrPositionExpired) {
		e.t.Fatalf("check %+v for a tenant without events: %v, want ErrPositionExpired", ev.Position, err)
	}
}

// What commits after a list is after the list's horizon: reading from it
// misses nothing, for servers, skills and the audit list alike.
func listThenWatchNoGap(e *env) {
	e.registerNew(e.info("alpha", "s"))
	servers, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	skills, err := e.store.FindSkills(e.ctx, e.tenant, registry.SkillFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	audit, err := e.store.Events(e.ctx, e.tenant, registry.EventFilter{})
	if err != nil || audit.Next != nil || len(audit.Events) != 1 {
		e.t.Fatalf("audit: %d events, next %v, %v", len(audit.Events), audit.Next, err)
	}
	b := e.registerNew(e.info("bravo"))
	for name, from := range map[string]registry.Position{
		"servers": servers.Horizon, "skills": skills.Horizon, "audit": audit.Horizon,
	} {
		page, err := e.store.Events(e.ctx, e.tenant, registry.EventFilter{After: from})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(page.Events) == 0 || page.Events[len(page.Events)-1].ServerID != b.ServerID {
			e.t.Fatalf("after the %s list's horizon: %s, want bravo's registration last", name, describe(page.Events))
		}
		if name == "audit" && len(page.Events) != 1 {
			e.t.Fatalf("after the audit list's horizon: %s, want bravo's registration alone", describe(page.Events))
		}
	}
}

// Registrations commit concurrently while a reader follows the tenant's
// trail from the positions it was given: it sees every event exactly once.
func concurrentCommitsNeverSkipped(e *env) {
	const writers, each = 8, 12
	var (
		done atomic.Bool
		mu   sync.Mutex
		seen = map[uuid.UUID]int{}
	)
	var wg sync.WaitGroup
	follow := func() {
		pos := registry.Position{}
		for {
			finished := done.Load()
			page, err := e.store.Events(e.ctx, e.tenant, registry.EventFilter{After: pos, Limit: 7})
			if err != nil {
				e.t.Errorf("events: %v", err)
				return
			}
			mu.Lock()
			for _, ev := range page.Events {
				seen[ev.EventID]++
			}
			mu.Unlock()
			pos = page.Horizon
			if finished && page.Next == nil {
				return
			}
		}
	}
	wg.Go(follow)
	run(writers, func(w int) {
		for i := range each {
			if _, _, _, err := e.store.Register(e.ctx, e.tenant, e.info(fmt.Sprintf("w%d-m%d", w, i)), 0); err != nil {
				e.t.Errorf("register: %v", err)
			}
		}
	})
	done.Store(true)
	wg.Wait()
	all := e.allEvents(e.tenant, registry.EventFilter{})
	if len(all) != writers*each {
		e.t.Fatalf("trail: %d events, want %d", len(all), writers*each)
	}
	for i, ev := range all {
		if ev.Position.Seq != int64(i+1) {
			e.t.Fatalf("event %d of the trail at %+v: positions have a gap", i, ev.Position)
		}
	}
	for _, ev := range all {
		if seen[ev.EventID] != 1 {
			e.t.Fatalf("event %s seen %d times by the follower", ev.EventID, seen[ev.EventID])
		}
	}
	if len(seen) != len(all) {
		e.t.Fatalf("follower saw %d events, the trail has %d", len(seen), len(all))
	}
}

// The audit list filters by module name.
func eventsFilterByModule(e *env) {
	a := e.registerNew(e.info("alpha"))
	e.registerNew(e.info("bravo"))
	e.deregister(a.ServerID)
	got := e.allEvents(e.tenant, registry.EventFilter{ModuleName: "alpha"})
	if len(got) != 2 || got[0].ModuleName != "alpha" || got[1].Kind != registry.KindDeregistered {
		e.t.Fatalf("alpha's events: %s", describe(got))
	}
	if got := e.allEvents(e.tenant, registry.EventFilter{ModuleName: "zulu"}); len(got) != 0 {
		e.t.Fatalf("zulu's events: %s", describe(got))
	}
}

// Skills across servers: ordered by name then module, filtered, paged.
func findSkills(e *env) {
	a := e.registerNew(e.info("alpha", "search", "book"))
	bInfo := e.info("bravo", "search")
	bInfo.SupportedProtocols = []string{"2025-06-18", "2025-11-25"}
	b := e.registerNew(bInfo)
	e.registerFor(uuid.New(), e.info("charlie", "search")) // another tenant
	e.deregister(a.ServerID)

	key := func(page registry.SkillPage) []string {
		var out []string
		for _, s := range page.Skills {
			out = append(out, s.Name+"@"+s.ModuleName)
		}
		return out
	}
	yes, no := true, false
	for _, c := range []struct {
		f    registry.SkillFilter
		want []string
	}{
		{registry.SkillFilter{}, []string{"book@alpha", "search@alpha", "search@bravo"}},
		{registry.SkillFilter{Name: "search"}, []string{"search@alpha", "search@bravo"}},
		{registry.SkillFilter{ModuleName: "alpha"}, []string{"book@alpha", "search@alpha"}},
		{registry.SkillFilter{Available: &yes}, []string{"search@bravo"}},
		{registry.SkillFilter{Available: &no}, []string{"book@alpha", "search@alpha"}},
		{registry.SkillFilter{Protocol: "2025-11-25"}, []string{"search@bravo"}},
		{registry.SkillFilter{ServerStatus: registry.StatusDeregistered}, []string{"book@alpha", "search@alpha"}},
	} {
		page, err := e.store.FindSkills(e.ctx, e.tenant, c.f)
		if err != nil {
			e.t.Fatalf("find %+v: %v", c.f, err)
		}
		if got := key(page); !slices.Equal(got, c.want) || page.Next != nil {
			e.t.Fatalf("find %+v: %v next %v, want %v", c.f, got, page.Next, c.want)
		}
	}
	page, err := e.store.FindSkills(e.ctx, e.tenant, registry.SkillFilter{Name: "search", ModuleName: "bravo"})
	if err != nil || len(page.Skills) != 1 {
		e.t.Fatalf("search@bravo: %v %v", key(page), err)
	}
	s := page.Skills[0]
	if s.ServerID != b.ServerID || s.ServerStatus != registry.StatusHealthy || s.Version != "1.0.0" ||
		!slices.Equal(s.SupportedProtocols, bInfo.SupportedProtocols) || !s.Available || s.UnavailableReason != nil ||
		s.Description != "does search" {
		e.t.Fatalf("search@bravo: %+v", s)
	}
	// Pages of one.
	var all []string
	f := registry.SkillFilter{Limit: 1}
	for range 10 {
		page, err := e.store.FindSkills(e.ctx, e.tenant, f)
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(all, key(page)...)
		if page.Next == nil {
			break
		}
		f.After = page.Next
	}
	if want := []string{"book@alpha", "search@alpha", "search@bravo"}; !slices.Equal(all, want) {
		e.t.Fatalf("paged: %v, want %v", all, want)
	}
}
