package storetest

import (
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// The MCP registry API's reads: filters, paging, when a server last
// changed, its skills; the latest position of a tenant's trail.
var catalogCases = []testCase{
	{"catalog_filters_and_pages", catalogFilters},
	{"catalog_changed_since", catalogChangedSince},
	{"catalog_skills_and_tenants", catalogSkills},
	{"latest_position", latestPosition},
}

func (e *env) catalog(f registry.CatalogFilter) registry.CatalogPage {
	e.t.Helper()
	return e.catalogFor(e.tenant, f)
}

func (e *env) catalogFor(tenant uuid.UUID, f registry.CatalogFilter) registry.CatalogPage {
	e.t.Helper()
	page, err := e.store.Catalog(e.ctx, tenant, f)
	if err != nil {
		e.t.Fatalf("catalog %+v: %v", f, err)
	}
	return page
}

func catalogModules(page registry.CatalogPage) []string {
	out := []string{}
	for _, en := range page.Entries {
		out = append(out, en.Server.ModuleName)
	}
	return out
}

func (e *env) wantCatalog(f registry.CatalogFilter, more bool, want ...string) registry.CatalogPage {
	e.t.Helper()
	page := e.catalog(f)
	if got := catalogModules(page); !slices.Equal(got, append([]string{}, want...)) || page.More != more {
		e.t.Fatalf("catalog %+v: %v more=%v, want %v more=%v", f, got, page.More, want, more)
	}
	for _, en := range page.Entries {
		if en.Server.CapabilityAdvertisement != nil {
			e.t.Fatalf("catalog entry %q carries its capability advertisement", en.Server.ModuleName)
		}
	}
	return page
}

func catalogFilters(e *env) {
	a := e.registerNew(e.info("alpha", "x"))
	e.advance(5 * time.Second)
	e.registerNew(e.info("beta", "x"))
	e.advance(5 * time.Second)
	c := e.registerNew(e.info("gamma", "x"))
	v2 := e.info("delta")
	v2.Version = "2.0.0"
	d := e.registerNew(v2)
	// alpha: lag 25s at the sweep, degraded; beta: 20s, degraded; gamma and delta: healthy
	e.advance(15 * time.Second)
	e.sweep()
	e.heartbeat(c.ServerID)
	e.heartbeat(d.ServerID)
	e.advance(20 * time.Second) // alpha 45s, beta 40s: unhealthy; gamma, delta 20s: degraded
	e.sweep()
	e.heartbeat(d.ServerID)
	e.deregister(a.ServerID)
	e.wantStatus(c.ServerID, registry.StatusDegraded)

	live := []registry.Status{registry.StatusHealthy, registry.StatusDegraded}
	e.wantCatalog(registry.CatalogFilter{Statuses: live}, false, "delta", "gamma")
	e.wantCatalog(registry.CatalogFilter{}, false, "alpha", "beta", "delta", "gamma")
	e.wantCatalog(registry.CatalogFilter{Statuses: []registry.Status{registry.StatusUnhealthy}}, false, "beta")
	e.wantCatalog(registry.CatalogFilter{Limit: 2}, true, "alpha", "beta")
	e.wantCatalog(registry.CatalogFilter{Limit: 2, AfterModule: "beta"}, false, "delta", "gamma")
	e.wantCatalog(registry.CatalogFilter{Limit: 1, AfterModule: "beta", Statuses: live}, true, "delta")
	e.wantCatalog(registry.CatalogFilter{Search: "MM"}, false, "gamma")
	e.wantCatalog(registry.CatalogFilter{Search: "Local.mcpd/b", SearchPrefix: "local.mcpd/"}, false, "beta")
	e.wantCatalog(registry.CatalogFilter{Search: "cal.mcpd/", SearchPrefix: "local.mcpd/"}, false, "alpha", "beta", "delta", "gamma")
	e.wantCatalog(registry.CatalogFilter{Search: "%"}, false)
	e.wantCatalog(registry.CatalogFilter{Search: "_"}, false)
	e.wantCatalog(registry.CatalogFilter{Version: "2.0.0"}, false, "delta")
	e.wantCatalog(registry.CatalogFilter{Version: "1.0.0", Statuses: live}, false, "gamma")
	e.wantCatalog(registry.CatalogFilter{ModuleName: "beta"}, false, "beta")
	e.wantCatalog(registry.CatalogFilter{ModuleName: "beta", Statuses: live}, false)
}

func catalogChangedSince(e *env) {
	t0 := e.now()
	a := e.registerNew(e.info("alpha"))
	e.advance(time.Second)
	t1 := e.now()
	b := e.registerNew(e.info("beta"))
	e.advance(19 * time.Second) // alpha 20s: degraded; beta 19s
	t20 := e.now()
	e.sweepOne()
	e.advance(time.Second)
	e.heartbeat(b.ServerID) // no transition: no change
	e.advance(time.Second)
	t22 := e.now()
	e.heartbeat(a.ServerID) // recovery
	e.advance(time.Second)
	t23 := e.now()
	e.deregister(b.ServerID)

	since := func(at time.Time) *time.Time { return &at }
	page := e.wantCatalog(registry.CatalogFilter{ChangedSince: since(t0)}, false, "alpha", "beta")
	wantChanged := map[string]time.Time{"alpha": t22, "beta": t23}
	for _, en := range page.Entries {
		if want := wantChanged[en.Server.ModuleName]; !en.StatusChangedAt.Equal(want) || en.StatusChangedAt.Location() != time.UTC {
			e.t.Fatalf("%s: status changed at %s, want %s UTC", en.Server.ModuleName, en.StatusChangedAt, want)
		}
	}
	e.wantCatalog(registry.CatalogFilter{ChangedSince: since(t22)}, false, "alpha", "beta")
	e.wantCatalog(registry.CatalogFilter{ChangedSince: since(t22.Add(time.Microsecond))}, false, "beta")
	e.wantCatalog(registry.CatalogFilter{ChangedSince: since(t23.Add(time.Microsecond))}, false)
	// Whatever the status: a deregistered server is listed when it changed.
	e.wantCatalog(registry.CatalogFilter{ChangedSince: since(t23)}, false, "beta")
	_ = t1
	_ = t20

	// A re-registration is a change, whatever the status.
	e.advance(time.Second)
	t24 := e.now()
	e.register(e.info("beta"))
	page = e.wantCatalog(registry.CatalogFilter{ChangedSince: since(t24)}, false, "beta")
	if !page.Entries[0].StatusChangedAt.Equal(t24) {
		e.t.Fatalf("re-registered: status changed at %s, want %s", page.Entries[0].StatusChangedAt, t24)
	}
}

func catalogSkills(e *env) {
	info := e.infoWithRemotes("calendar", "search", "book")
	srv := e.registerNew(info)
	e.disable(srv.ServerID, "book", "upstream_disabled")
	page := e.wantCatalog(registry.CatalogFilter{}, false, "calendar")
	en := page.Entries[0]
	want := []registry.SkillState{{Name: "book", Available: false}, {Name: "search", Available: true}}
	if !reflect.DeepEqual(en.Skills, want) {
		e.t.Fatalf("skills %+v, want %+v", en.Skills, want)
	}
	e.wantRemotes("catalog", en.Server, testRemotes, info.Description, info.Title)
	if en.Server.ServerID != srv.ServerID || en.Server.Version != "1.0.0" || !slices.Equal(en.Server.SupportedProtocols, []string{"2025-06-18"}) ||
		!en.Server.LastHeartbeatAt.Equal(e.now()) || !en.Server.RegisteredAt.Equal(e.now()) || !en.StatusChangedAt.Equal(e.now()) {
		e.t.Fatalf("catalog entry %+v", en)
	}
	bare := e.registerNew(e.info("bare"))
	page = e.wantCatalog(registry.CatalogFilter{ModuleName: "bare"}, false, "bare")
	if page.Entries[0].Skills == nil || len(page.Entries[0].Skills) != 0 || page.Entries[0].Server.ServerID != bare.ServerID {
		e.t.Fatalf("a server without skills: %+v", page.Entries[0])
	}
	e.advance(35 * time.Second)
	e.sweep()
	page = e.wantCatalog(registry.CatalogFilter{ModuleName: "calendar"}, false, "calendar")
	for _, sk := range page.Entries[0].Skills {
		if sk.Available {
			e.t.Fatalf("skill %q available on an unhealthy server", sk.Name)
		}
	}
	if got := catalogModules(e.catalogFor(uuid.New(), registry.CatalogFilter{})); len(got) != 0 {
		e.t.Fatalf("another tenant sees %v", got)
	}
}

func latestPosition(e *env) {
	lr := e.store
	other := uuid.New()
	a := e.registerNew(e.info("alpha"))
	e.registerFor(other, e.info("alpha"))
	e.deregister(a.ServerID)
	e.registerFor(other, e.info("beta"))
	evs := e.allEvents(e.tenant, registry.EventFilter{})
	if len(evs) != 2 {
		e.t.Fatalf("events: %d, want 2", len(evs))
	}
	// The tenant's horizon is its latest event's position.
	horizon, err := e.store.Horizon(e.ctx, e.tenant)
	if err != nil {
		e.t.Fatal(err)
	}
	if horizon != evs[1].Position {
		e.t.Fatalf("horizon %+v, the latest event at %+v", horizon, evs[1].Position)
	}
	check := func(upTo registry.Position, want registry.Position) {
		e.t.Helper()
		got, err := lr.LatestPosition(e.ctx, e.tenant, upTo)
		if err != nil {
			e.t.Fatalf("latest position up to %+v: %v", upTo, err)
		}
		if got.Compare(want) != 0 || (want != (registry.Position{}) && got.Epoch != want.Epoch) {
			e.t.Fatalf("latest position up to %+v: %+v, want %+v", upTo, got, want)
		}
	}
	check(horizon, evs[1].Position)
	check(evs[1].Position, evs[1].Position)
	check(evs[0].Position, evs[0].Position)
	check(registry.Position{Epoch: horizon.Epoch}, registry.Position{})
	check(registry.Position{Epoch: horizon.Epoch, Seq: 1 << 62}, evs[1].Position)
	got, err := lr.LatestPosition(e.ctx, uuid.New(), horizon)
	if err != nil || got != (registry.Position{}) {
		e.t.Fatalf("a tenant without events: %+v, %v", got, err)
	}
}
