package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Registration, re-registration, the trace id, what is stored, tenants.
var registrationCases = []testCase{
	{"reregister_updates_in_place", reregisterUpdatesInPlace},
	{"reregister_healthy", reregisterHealthy},
	{"reregister_after_deregister", reregisterAfterDeregister},
	{"reregister_removes_skills", reregisterRemovesSkills},
	{"many_skills", manySkills},
	{"trace_id_everywhere", traceIDEverywhere},
	{"trace_id_made_by_store", traceIDMadeByStore},
	{"capabilities_and_protocols", capabilitiesAndProtocols},
	{"capability_numbers_at_the_limits", capabilityNumbersAtTheLimits},
	{"event_body_has_no_capabilities", eventBodyHasNoCapabilities},
	{"tenant_isolation", tenantIsolation},
	{"unknown_server", unknownServer},
	{"timestamps_microseconds_utc", timestampsMicrosecondsUTC},
}

// Re-registering an unhealthy server updates the same row: same id,
// registered_at and trace id; new version, protocols, capabilities and
// skills; healthy, with the lag counted from now.
func reregisterUpdatesInPlace(e *env) {
	v1 := e.info("calendar", "a", "b")
	v1.SupportedProtocols = []string{"2025-03-26"}
	srv := e.registerNew(v1)
	skillIDs := map[string]uuid.UUID{}
	for _, k := range e.skills(srv.ServerID) {
		skillIDs[k.Name] = k.SkillID
	}
	e.advance(35 * time.Second)
	e.sweepOne()
	e.advance(2 * time.Second)

	v2 := registry.ServerInfo{
		ModuleName:              "calendar",
		Version:                 "2.0.0-rc.1+build.7",
		SupportedProtocols:      []string{"2025-06-18", "2025-11-25"},
		CapabilityAdvertisement: json.RawMessage(`{"tools": {"listChanged": false}, "prompts": {}}`),
		Skills: []registry.SkillInfo{
			{Name: "c", Description: "new"}, {Name: "a", Description: "changed"}, {Name: "b", Description: "does b"},
		},
		TraceID: registry.NewTraceID(),
	}
	got, created, ev := e.register(v2)
	if created {
		e.t.Fatalf("re-register: created = true, want false")
	}
	if got.ServerID != srv.ServerID {
		e.t.Fatalf("re-register: server_id %s, want the same %s", got.ServerID, srv.ServerID)
	}
	e.checkServer(got, srvWant{status: registry.StatusHealthy, heartbeat: e.now(), registered: Start})
	if got.TraceID != srv.TraceID {
		e.t.Fatalf("re-register: trace_id %q, want the first registration's %q", got.TraceID, srv.TraceID)
	}
	if got.Version != v2.Version {
		e.t.Fatalf("re-register: version %q, want %q", got.Version, v2.Version)
	}
	if err := sameList("supported_protocols", got.SupportedProtocols, v2.SupportedProtocols); err != nil {
		e.t.Fatalf("re-register: %v", err)
	}
	if !jsonEqual(got.CapabilityAdvertisement, v2.CapabilityAdvertisement) {
		e.t.Fatalf("re-register: capability_advertisement %s, want %s", got.CapabilityAdvertisement, v2.CapabilityAdvertisement)
	}
	e.checkEvent(ev, evWant{kind: registry.KindRegistered, srv: got, from: registry.StatusUnhealthy,
		to: registry.StatusHealthy, at: e.now(), affected: []string{"a", "b", "c"}})
	e.wantLogged(ev)
	if stored := e.server(srv.ServerID); !jsonEqual(mustJSON(e, stored), mustJSON(e, got)) {
		e.t.Fatalf("re-register: the stored server differs from the one returned:\n %s\n %s", mustJSON(e, stored), mustJSON(e, got))
	}

	e.wantSkills(srv.ServerID, reasons("", "a", "b", "c"))
	for _, k := range e.skills(srv.ServerID) {
		if id, ok := skillIDs[k.Name]; ok && k.SkillID != id {
			e.t.Fatalf("skill %q: skill_id %s changed from %s on re-registration", k.Name, k.SkillID, id)
		}
		if want := map[string]string{"a": "changed", "b": "does b", "c": "new"}[k.Name]; k.Description != want {
			e.t.Fatalf("skill %q: description %q, want %q", k.Name, k.Description, want)
		}
	}
	e.sweepNone()
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindUnhealthy, registry.KindRegistered)
}

// Re-registering a healthy server is a registration event from healthy.
func reregisterHealthy(e *env) {
	info := e.info("calendar", "a")
	srv := e.registerNew(info)
	e.advance(15 * time.Second)
	info.Version = "1.0.1"
	got, created, ev := e.register(info)
	if created || got.ServerID != srv.ServerID {
		e.t.Fatalf("re-register: created %v, server %s; want false, %s", created, got.ServerID, srv.ServerID)
	}
	e.checkServer(got, srvWant{status: registry.StatusHealthy, heartbeat: e.now(), registered: Start})
	e.checkEvent(ev, evWant{kind: registry.KindRegistered, srv: got, from: registry.StatusHealthy,
		to: registry.StatusHealthy, at: e.now(), affected: []string{"a"}})
	// The registration was a sign of life: 15 s later the server is still healthy.
	e.advance(15 * time.Second)
	e.sweepNone()
}

// Registering a deregistered server brings it back: same id, healthy,
// deregistered_at nil, its cascade skills available again.
func reregisterAfterDeregister(e *env) {
	info := e.info("calendar", "a", "b")
	srv := e.registerNew(info)
	e.disable(srv.ServerID, "b", "retired")
	e.advance(time.Second)
	e.deregister(srv.ServerID)
	e.advance(time.Minute)

	info.Version = "1.1.0"
	got, created, ev := e.register(info)
	if created || got.ServerID != srv.ServerID {
		e.t.Fatalf("re-register: created %v, server %s; want false, %s", created, got.ServerID, srv.ServerID)
	}
	e.checkServer(got, srvWant{status: registry.StatusHealthy, heartbeat: e.now(), registered: Start})
	if got.TraceID != srv.TraceID || got.Version != "1.1.0" {
		e.t.Fatalf("re-register: trace_id %q version %q; want %q, 1.1.0", got.TraceID, got.Version, srv.TraceID)
	}
	e.checkEvent(ev, evWant{kind: registry.KindRegistered, srv: got, from: registry.StatusDeregistered,
		to: registry.StatusHealthy, at: e.now(), affected: []string{"a", "b"}})
	e.wantSkills(srv.ServerID, map[string]string{"a": "", "b": "retired"})

	e.advance(time.Second)
	hb, hev := e.heartbeat(srv.ServerID)
	if hev != nil || hb.Status != registry.StatusHealthy {
		e.t.Fatalf("heartbeat after re-registration: status %s, event %v", hb.Status, hev)
	}
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindDeregistered, registry.KindRegistered)
}

// A server of many skills registers, loses one to maintenance and all to
// its deregistration, and registers again with half of them: the same
// rules as for a few.
func manySkills(e *env) {
	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("skill-%02d", i)
	}
	srv := e.registerNew(e.info("calendar", names...))
	e.wantSkills(srv.ServerID, reasons("", names...))
	e.disable(srv.ServerID, "skill-07", "maintenance")
	e.advance(time.Second)
	e.deregister(srv.ServerID)
	e.advance(time.Second)

	half := names[:20]
	got, created, ev := e.register(e.info("calendar", half...))
	if created || got.ServerID != srv.ServerID {
		e.t.Fatalf("re-register: created %v, server %s; want false, %s", created, got.ServerID, srv.ServerID)
	}
	e.checkEvent(ev, evWant{kind: registry.KindRegistered, srv: got, from: registry.StatusDeregistered,
		to: registry.StatusHealthy, at: e.now(), affected: half})
	want := reasons("", half...)
	want["skill-07"] = "maintenance"
	e.wantSkills(srv.ServerID, want)
}

// A re-registration's skills are the complete set: the others go.
func reregisterRemovesSkills(e *env) {
	srv := e.registerNew(e.info("calendar", "a", "b", "c"))
	e.disable(srv.ServerID, "b", "maintenance")
	before := map[string]uuid.UUID{}
	for _, k := range e.skills(srv.ServerID) {
		before[k.Name] = k.SkillID
	}
	_, _, ev := e.register(e.info("calendar", "d", "a"))
	e.checkEvent(ev, evWant{kind: registry.KindRegistered, srv: srv, from: registry.StatusHealthy,
		to: registry.StatusHealthy, at: e.now(), affected: []string{"a", "d"}})
	e.wantSkills(srv.ServerID, reasons("", "a", "d"))
	for _, k := range e.skills(srv.ServerID) {
		if k.Name == "a" && k.SkillID != before["a"] {
			e.t.Fatalf("skill a: skill_id changed on re-registration")
		}
		if k.Name == "d" && (k.SkillID == before["b"] || k.SkillID == before["c"]) {
			e.t.Fatalf("skill d reuses a removed skill's id")
		}
	}
	_, _, ev = e.register(e.info("calendar"))
	e.checkEvent(ev, evWant{kind: registry.KindRegistered, srv: srv, from: registry.StatusHealthy,
		to: registry.StatusHealthy, at: e.now(), affected: []string{}})
	if skills := e.skills(srv.ServerID); len(skills) != 0 {
		e.t.Fatalf("re-register without skills: %d skills left", len(skills))
	}
}

// The trace id of the registration is the server's, through heartbeats and
// on every audit event, whatever later registrations say.
func traceIDEverywhere(e *env) {
	info := e.info("calendar", "a")
	trace := info.TraceID
	srv := e.registerNew(info)
	if srv.TraceID != trace {
		e.t.Fatalf("register: trace_id %q, want %q", srv.TraceID, trace)
	}
	check := func(s registry.Server, what string) {
		e.t.Helper()
		if s.TraceID != trace {
			e.t.Fatalf("%s: trace_id %q, want %q", what, s.TraceID, trace)
		}
	}
	hb, _ := e.heartbeat(srv.ServerID)
	check(hb, "heartbeat")
	e.advance(25 * time.Second)
	e.sweepOne()
	hb, _ = e.heartbeat(srv.ServerID)
	check(hb, "heartbeat from degraded")
	e.advance(35 * time.Second)
	e.sweepOne()
	hb, _ = e.heartbeat(srv.ServerID)
	check(hb, "heartbeat from unhealthy")
	info.TraceID = registry.NewTraceID()
	again, _, _ := e.register(info)
	check(again, "re-register with another trace id")
	dr, _ := e.deregister(srv.ServerID)
	check(dr, "deregister")
	check(e.server(srv.ServerID), "server")
	evs := e.eventsOf(srv.ServerID)
	if len(evs) != 7 {
		e.t.Fatalf("events: %d, want 7: %s", len(evs), describe(evs))
	}
	for _, ev := range evs {
		if ev.TraceID != trace {
			e.t.Fatalf("event %s: trace_id %q, want %q", ev.Kind, ev.TraceID, trace)
		}
	}
}

// With no trace id, the store makes one.
func traceIDMadeByStore(e *env) {
	info := e.info("calendar")
	info.TraceID = ""
	srv, _, ev := e.register(info)
	if !registry.ValidTraceID(srv.TraceID) {
		e.t.Fatalf("register without trace id: trace_id %q, want 32 lowercase hex digits", srv.TraceID)
	}
	if ev.TraceID != srv.TraceID {
		e.t.Fatalf("event trace_id %q, want the server's %q", ev.TraceID, srv.TraceID)
	}
}

// The capability advertisement is kept as JSON, protocols as an ordered list.
func capabilitiesAndProtocols(e *env) {
	info := e.info("calendar")
	info.SupportedProtocols = []string{"2026-07-28", "2024-11-05", "2025-06-18"}
	info.CapabilityAdvertisement = json.RawMessage(`{
		"tools": {"listChanged": true},
		"resources": {"subscribe": false, "listChanged": true},
		"experimental": {"x-batch": {"max": 16, "modes": ["a", "b"], "ratio": 0.5, "none": null}},
		"name": "caf\u00e9 \u2603"
	}`)
	srv := e.registerNew(info)
	check := func(s registry.Server, what string) {
		e.t.Helper()
		if !jsonEqual(s.CapabilityAdvertisement, info.CapabilityAdvertisement) {
			e.t.Fatalf("%s: capability_advertisement %s, want %s", what, s.CapabilityAdvertisement, info.CapabilityAdvertisement)
		}
		if err := sameList("supported_protocols", s.SupportedProtocols, info.SupportedProtocols); err != nil {
			e.t.Fatalf("%s: %v", what, err)
		}
	}
	check(srv, "register")
	check(e.server(srv.ServerID), "server")
	hb, _ := e.heartbeat(srv.ServerID)
	check(hb, "heartbeat")
	page, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{Limit: 10})
	if err != nil || len(page.Servers) != 1 {
		e.t.Fatalf("servers: %d, %v", len(page.Servers), err)
	}
	check(page.Servers[0], "servers")

	plain := e.info("plain")
	plain.CapabilityAdvertisement = nil
	p := e.registerNew(plain)
	if !jsonAbsent(p.CapabilityAdvertisement) || !jsonAbsent(e.server(p.ServerID).CapabilityAdvertisement) {
		e.t.Fatalf("no capabilities: got %s, want none", e.server(p.ServerID).CapabilityAdvertisement)
	}
	empty := e.info("empty")
	empty.CapabilityAdvertisement = json.RawMessage(`{}`)
	if got := e.registerNew(empty); !jsonEqual(got.CapabilityAdvertisement, []byte(`{}`)) {
		e.t.Fatalf("empty capabilities: got %s, want {}", got.CapabilityAdvertisement)
	}
}

// Both stores take every advertisement that Validate accepts, numbers at
// the edge of PostgreSQL's numeric and of MaxCapabilityBytes included, and
// keep it within MaxCapabilityBytes; Validate refuses those past either
// (1e131072 was a 500 on PostgreSQL and a 201 on the memory store;
// 1e131071, 8 bytes, was stored by jsonb as 131,072 digits).
func capabilityNumbersAtTheLimits(e *env) {
	for i, c := range []struct {
		num   string
		valid bool
	}{
		{"1e65000", true}, {"-9.999e65000", true}, {"1e-16383", true}, {"0e999999", true},
		{"0." + strings.Repeat("7", 16383), true}, {"1" + strings.Repeat("0", 65000), true},
		{"1e131071", false}, {"-9.999e131071", false}, {"1" + strings.Repeat("0", 131071), false}, {"1e65536", false},
		{"1e131072", false}, {"-1e999999", false}, {"1e-999999", false}, {"1e-16384", false},
		{"0." + strings.Repeat("0", 20000), false}, {"0e1073741823", false},
	} {
		info := e.info(fmt.Sprintf("num-%d", i))
		info.CapabilityAdvertisement = json.RawMessage(`{"n":{"x":[` + c.num + `]}}`)
		err := info.Validate()
		var fe *registry.FieldError
		if !c.valid {
			if !errors.As(err, &fe) || fe.Field != "capability_advertisement" {
				e.t.Fatalf("number %.30q (%d bytes): Validate = %v, want a FieldError on capability_advertisement", c.num, len(c.num), err)
			}
			continue
		}
		if err != nil {
			e.t.Fatalf("number %.30q (%d bytes): Validate = %v, want nil", c.num, len(c.num), err)
		}
		srv, _, _, err := e.store.Register(e.ctx, e.tenant, info, 0)
		if err != nil {
			e.t.Fatalf("number %.30q (%d bytes): Validate accepts it, the store refuses: %v", c.num, len(c.num), err)
		}
		if n := len(e.server(srv.ServerID).CapabilityAdvertisement); n > registry.MaxCapabilityBytes {
			e.t.Fatalf("number %.30q (%d bytes): stored as %d bytes, past %d", c.num, len(c.num), n, registry.MaxCapabilityBytes)
		}
	}
}

// No event, in any form, carries the capability advertisement.
func eventBodyHasNoCapabilities(e *env) {
	const marker = "cap-marker-5d1e"
	info := e.info("calendar", "a")
	info.CapabilityAdvertisement = json.RawMessage(`{"experimental": {"` + marker + `": "` + marker + `"}}`)
	srv := e.registerNew(info)
	e.advance(25 * time.Second)
	e.sweepOne()
	e.advance(10 * time.Second)
	e.sweepOne()
	e.heartbeat(srv.ServerID)
	e.deregister(srv.ServerID)
	evs := e.eventsOf(srv.ServerID)
	if len(evs) != 5 {
		e.t.Fatalf("events: %d, want 5", len(evs))
	}
	for _, ev := range evs {
		if b := mustJSON(e, ev); strings.Contains(string(b), marker) || strings.Contains(string(b), "capabilit") {
			e.t.Fatalf("event %s carries capabilities: %s", ev.Kind, b)
		}
		if ev.Body.Version != info.Version || ev.Body.ServerID != srv.ServerID || ev.Body.ModuleName != "calendar" {
			e.t.Fatalf("event %s: body %+v", ev.Kind, ev.Body)
		}
	}
}

// Another tenant's server does not exist for this tenant.
func tenantIsolation(e *env) {
	mine := e.registerNew(e.info("calendar", "a"))
	other := uuid.New()
	// Late enough for a heartbeat to be seen, too early for the monitor.
	e.advance(time.Second)
	notFound := func(what string, err error) {
		e.t.Helper()
		if !errors.Is(err, registry.ErrNotFound) {
			e.t.Fatalf("%s of another tenant's server: err %v, want ErrNotFound", what, err)
		}
	}
	_, err := e.store.Server(e.ctx, other, mine.ServerID)
	notFound("server", err)
	_, ev, err := e.store.Heartbeat(e.ctx, other, mine.ServerID)
	notFound("heartbeat", err)
	if ev != nil {
		e.t.Fatalf("heartbeat of another tenant's server: an event")
	}
	_, ev, err = e.store.Deregister(e.ctx, other, mine.ServerID)
	notFound("deregister", err)
	if ev != nil {
		e.t.Fatalf("deregister of another tenant's server: an event")
	}
	_, err = e.store.Skills(e.ctx, other, mine.ServerID)
	notFound("skills", err)

	page, err := e.store.Servers(e.ctx, other, registry.ServerFilter{Limit: 100})
	if err != nil || len(page.Servers) != 0 || page.Next != nil {
		e.t.Fatalf("servers of another tenant: %d, next %v, %v; want none", len(page.Servers), page.Next, err)
	}
	page, err = e.store.Servers(e.ctx, other, registry.ServerFilter{ModuleName: "calendar", Limit: 100})
	if err != nil || len(page.Servers) != 0 {
		e.t.Fatalf("servers of another tenant by module: %d, %v; want none", len(page.Servers), err)
	}
	if evs := e.allEvents(other, registry.EventFilter{}); len(evs) != 0 {
		e.t.Fatalf("events of another tenant: %s", describe(evs))
	}
	if evs := e.allEvents(other, registry.EventFilter{ServerID: &mine.ServerID}); len(evs) != 0 {
		e.t.Fatalf("events of another tenant's server: %s", describe(evs))
	}

	// Nothing the other tenant tried changed the server.
	e.checkServer(e.server(mine.ServerID), srvWant{status: registry.StatusHealthy, heartbeat: Start, registered: Start})
	e.wantSkills(mine.ServerID, reasons("", "a"))
	e.wantKinds(mine.ServerID, registry.KindRegistered)

	// The same module name in the other tenant is another server.
	theirs, created, _ := e.registerFor(other, e.info("calendar", "a"))
	if !created || theirs.ServerID == mine.ServerID || theirs.TenantID != other {
		e.t.Fatalf("register of the same module in another tenant: created %v, server %s (mine %s), tenant %s",
			created, theirs.ServerID, mine.ServerID, theirs.TenantID)
	}
	mineList, err := e.store.Servers(e.ctx, e.tenant, registry.ServerFilter{Limit: 100})
	if err != nil || len(mineList.Servers) != 1 || mineList.Servers[0].ServerID != mine.ServerID {
		e.t.Fatalf("servers: %d, %v; want only mine", len(mineList.Servers), err)
	}
	if evs := e.allEvents(e.tenant, registry.EventFilter{}); len(evs) != 1 {
		e.t.Fatalf("events: %s, want only mine", describe(evs))
	}
}

// An id that no server has is not found.
func unknownServer(e *env) {
	e.registerNew(e.info("calendar"))
	id := uuid.New()
	if _, err := e.store.Server(e.ctx, e.tenant, id); !errors.Is(err, registry.ErrNotFound) {
		e.t.Fatalf("server: %v, want ErrNotFound", err)
	}
	if _, _, err := e.store.Heartbeat(e.ctx, e.tenant, id); !errors.Is(err, registry.ErrNotFound) {
		e.t.Fatalf("heartbeat: %v, want ErrNotFound", err)
	}
	if _, _, err := e.store.Deregister(e.ctx, e.tenant, id); !errors.Is(err, registry.ErrNotFound) {
		e.t.Fatalf("deregister: %v, want ErrNotFound", err)
	}
	if _, err := e.store.Skills(e.ctx, e.tenant, id); !errors.Is(err, registry.ErrNotFound) {
		e.t.Fatalf("skills: %v, want ErrNotFound", err)
	}
	if evs := e.allEvents(e.tenant, registry.EventFilter{ServerID: &id}); len(evs) != 0 {
		e.t.Fatalf("events of an unknown server: %s", describe(evs))
	}
	if err := e.store.Ping(e.ctx); err != nil {
		e.t.Fatalf("ping: %v", err)
	}
}

// Times keep microseconds and come back in UTC.
func timestampsMicrosecondsUTC(e *env) {
	e.advance(1234567 * time.Microsecond)
	srv := e.registerNew(e.info("calendar"))
	at := Start.Add(1234567 * time.Microsecond)
	e.checkServer(srv, srvWant{status: registry.StatusHealthy, heartbeat: at, registered: at})
	e.advance(7654321 * time.Microsecond)
	hb, _ := e.heartbeat(srv.ServerID)
	e.checkServer(hb, srvWant{status: registry.StatusHealthy, heartbeat: e.now(), registered: at})
	e.advance(1 * time.Microsecond)
	dr, ev := e.deregister(srv.ServerID)
	e.checkServer(dr, srvWant{status: registry.StatusDeregistered, heartbeat: e.now().Add(-time.Microsecond),
		registered: at, deregistered: e.now()})
	e.checkEvent(*ev, evWant{kind: registry.KindDeregistered, srv: srv, from: registry.StatusHealthy,
		to: registry.StatusDeregistered, at: e.now()})
	for _, ev := range e.eventsOf(srv.ServerID) {
		e.sameTime("event occurred_at", ev.OccurredAt, ev.OccurredAt) // UTC
	}
	b, _ := json.Marshal(e.server(srv.ServerID))
	if !strings.Contains(string(b), `"registered_at":"2026-05-17T10:00:01.234567Z"`) {
		e.t.Fatalf("server JSON %s: want registered_at 2026-05-17T10:00:01.234567Z", b)
	}
}

func mustJSON(e *env, v any) []byte {
	e.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		e.t.Fatalf("marshal: %v", err)
	}
	return b
}
