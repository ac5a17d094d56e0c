package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// availabilityCases check the availability reads against a reference that
// samples the audit trail second by second: random sequences of
// registrations, heartbeats, sweeps and deregistrations, and the edges
// named one by one (a window starting inside an outage, a server
// registered again after its deregistration, a transition exactly at the
// window's start, a server registered inside the window).
var availabilityCases = []testCase{
	{"availability/random sequences match the reference", testAvailabilityRandom},
	{"availability/window starts inside an outage", testAvailabilityInsideOutage},
	{"availability/re-registered after deregistration", testAvailabilityReregistered},
	{"availability/transition exactly at the window's start", testAvailabilityAtFrom},
	{"availability/registered inside the window counts from registration", testAvailabilityRegisteredInside},
	{"availability/tenants and unknown names", testAvailabilityIsolation},
}

// availability reads one server's availability over w ending at now.
func (e *env) availability(id uuid.UUID, w registry.AvailabilityWindow, now time.Time) registry.Availability {
	e.t.Helper()
	a, err := e.store.ServerAvailability(e.ctx, e.tenant, id, registry.AvailabilityRequest{Window: w, Now: now})
	if err != nil {
		e.t.Fatalf("availability of %s over %s: %v", id, w, err)
	}
	return a
}

// refStatus is the status of a trail (one server's events, in commit
// order) at t: the last event at or before t, or after every event before
// t when strict; "" before the first.
func refStatus(evs []registry.Event, t time.Time, strict bool) registry.Status {
	var st registry.Status
	for _, ev := range evs {
		if ev.OccurredAt.After(t) || strict && ev.OccurredAt.Equal(t) {
			continue
		}
		st = ev.ToStatus
	}
	return st
}

// refBest is the best status of several trails at t: a skill's.
func refBest(trails [][]registry.Event, t time.Time, strict bool) registry.Status {
	var best registry.Status
	for _, evs := range trails {
		st := refStatus(evs, t, strict)
		if st != "" && (best == "" || rank(st) < rank(best)) {
			best = st
		}
	}
	return best
}

func rank(s registry.Status) int {
	for i, st := range registry.Statuses {
		if st == s {
			return i
		}
	}
	return -1
}

// reference computes the availability of trails (one: a server; several:
// a skill) over w ending at to, second by second: every event of the
// suite falls on a whole second from Start, and so does every window.
func reference(trails [][]registry.Event, w registry.AvailabilityWindow, to time.Time) registry.Availability {
	from := to.Add(-w.Duration())
	var us [4]int64
	type run struct {
		from, to time.Time
		st       registry.Status
	}
	var runs []run
	for t := from; t.Before(to); t = t.Add(time.Second) {
		st := refBest(trails, t, false)
		if st == "" {
			continue
		}
		us[rank(st)] += 1e6
		if n := len(runs); n > 0 && runs[n-1].st == st && runs[n-1].to.Equal(t) {
			runs[n-1].to = t.Add(time.Second)
		} else {
			runs = append(runs, run{t, t.Add(time.Second), st})
		}
	}
	outages := []registry.Outage{}
	for i := len(runs) - 1; i >= 0 && len(outages) < registry.MaxOutages; i-- {
		if r := runs[i]; r.st == registry.StatusUnhealthy || r.st == registry.StatusDeregistered {
			outages = append(outages, registry.Outage{From: r.from, To: r.to, Status: r.st})
		}
	}
	transitions := 0
	if len(trails) == 1 {
		for _, ev := range trails[0] {
			if !ev.OccurredAt.Before(from) && !ev.OccurredAt.After(to) {
				transitions++
			}
		}
	} else {
		for t := from; !t.After(to); t = t.Add(time.Second) {
			if refBest(trails, t, true) != refBest(trails, t, false) {
				transitions++
			}
		}
	}
	return registry.NewAvailability(w, from, to, us, outages, transitions)
}

// trail is every event of one of the tenant's servers, in commit order.
func (e *env) trail(id uuid.UUID) []registry.Event {
	e.t.Helper()
	return e.allEvents(e.tenant, registry.EventFilter{ServerID: &id})
}

func (e *env) wantAvailability(what string, got, want registry.Availability) {
	e.t.Helper()
	if !reflect.DeepEqual(got, want) {
		e.t.Fatalf("availability of %s:\n got  %s\n want %s", what, formatAvailability(got), formatAvailability(want))
	}
}

func formatAvailability(a registry.Availability) string {
	ratio := "null"
	if a.AvailableRatio != nil {
		ratio = fmt.Sprint(*a.AvailableRatio)
	}
	s := fmt.Sprintf("%s [+%s, +%s] observed %gs ratio %s %+v transitions %d outages:",
		a.Window, a.From.Sub(Start), a.To.Sub(Start), a.ObservedSeconds, ratio, a.Seconds, a.Transitions)
	for _, o := range a.Outages {
		s += fmt.Sprintf(" [+%s, +%s %s]", o.From.Sub(Start), o.To.Sub(Start), o.Status)
	}
	return s
}

// testAvailabilityRandom drives three servers offering one shared skill
// through random operations and checks every server and the skill, over
// each window ending now and at the times of transitions, against the
// reference; and the ratios of the list against the servers'.
func testAvailabilityRandom(e *env) {
	seed := time.Now().UnixNano()
	e.t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 35))
	modules := []string{"avail-a", "avail-b", "avail-c"}
	ids := map[string]uuid.UUID{}
	for range 60 {
		m := modules[rng.IntN(len(modules))]
		id, known := ids[m]
		switch op := rng.IntN(10); {
		case !known || op == 0:
			srv, _, _ := e.register(e.info(m, "shared", m+"-own"))
			ids[m] = srv.ServerID
		case op <= 3:
			if _, _, err := e.store.Heartbeat(e.ctx, e.tenant, id); err != nil && !errors.Is(err, registry.ErrDeregistered) {
				e.t.Fatalf("heartbeat: %v", err)
			}
		case op == 4:
			e.deregister(id)
		default:
			e.sweep()
		}
		// Mostly seconds, sometimes long silences: outages of minutes.
		if rng.IntN(4) == 0 {
			e.advance(time.Duration(rng.IntN(1800)) * time.Second)
		} else {
			e.advance(time.Duration(rng.IntN(25)) * time.Second)
		}
	}
	trails := map[uuid.UUID][]registry.Event{}
	var all [][]registry.Event
	var list []uuid.UUID
	for _, m := range modules {
		if id, ok := ids[m]; ok {
			trails[id] = e.trail(id)
			all = append(all, trails[id])
			list = append(list, id)
		}
	}
	// Ends: now, a second after now, and the time of some transitions (a
	// window that ends on one, and one that starts on one).
	ends := []time.Time{e.now(), e.now().Add(time.Hour)}
	for _, evs := range all {
		ev := evs[rng.IntN(len(evs))]
		ends = append(ends, ev.OccurredAt, ev.OccurredAt.Add(time.Hour))
	}
	for _, to := range ends {
		for _, w := range []registry.AvailabilityWindow{registry.Window1h, registry.Window24h} {
			for id, evs := range trails {
				e.wantAvailability(fmt.Sprintf("%s over %s to +%s", id, w, to.Sub(Start)), e.availability(id, w, to), reference([][]registry.Event{evs}, w, to))
			}
			got, err := e.store.SkillAvailability(e.ctx, e.tenant, "shared", registry.AvailabilityRequest{Window: w, Now: to})
			if err != nil {
				e.t.Fatalf("skill availability: %v", err)
			}
			e.wantAvailability(fmt.Sprintf("skill over %s to +%s", w, to.Sub(Start)), got, reference(all, w, to))
			ratios, err := e.store.AvailabilityRatios(e.ctx, e.tenant, append(list, uuid.New()), registry.AvailabilityRequest{Window: w, Now: to})
			if err != nil {
				e.t.Fatalf("ratios: %v", err)
			}
			var want []registry.AvailabilityRatio
			for _, id := range list {
				a := reference([][]registry.Event{trails[id]}, w, to)
				want = append(want, registry.AvailabilityRatio{ServerID: id, ObservedSeconds: a.ObservedSeconds, AvailableRatio: a.AvailableRatio})
			}
			if !reflect.DeepEqual(ratios, want) {
				e.t.Fatalf("ratios over %s to +%s:\n got  %+v\n want %+v", w, to.Sub(Start), ratios, want)
			}
		}
	}
}

func ratio(r float64) *float64 { return &r }

// testAvailabilityInsideOutage: the window starts while the server is
// unhealthy; the outage is cut at the window's start.
func testAvailabilityInsideOutage(e *env) {
	srv := e.registerNew(e.info("avail-outage", "s"))
	e.advance(3*Interval + 5*time.Second)
	if ev := e.sweepOne(); ev.ToStatus != registry.StatusUnhealthy {
		e.t.Fatalf("sweep: %s, want unhealthy", ev.ToStatus)
	}
	down := e.now()
	e.advance(70*time.Minute - 35*time.Second)
	if _, ev := e.heartbeat(srv.ServerID); ev == nil {
		e.t.Fatal("heartbeat: no recovery")
	}
	up := e.now()
	to := Start.Add(90 * time.Minute)
	from := to.Add(-time.Hour)
	want := registry.NewAvailability(registry.Window1h, from, to,
		[4]int64{int64(to.Sub(up) / time.Microsecond), 0, int64(up.Sub(from) / time.Microsecond), 0},
		[]registry.Outage{{From: from, To: up, Status: registry.StatusUnhealthy}}, 1)
	e.wantAvailability("a window inside an outage", e.availability(srv.ServerID, registry.Window1h, to), want)
	if *want.AvailableRatio != 0.33333 {
		e.t.Fatalf("ratio %v, want 0.33333", *want.AvailableRatio)
	}
	// The whole outage, from the 24 h window.
	got := e.availability(srv.ServerID, registry.Window24h, to)
	if len(got.Outages) != 1 || !got.Outages[0].From.Equal(down) || !got.Outages[0].To.Equal(up) {
		e.t.Fatalf("24h outages %+v, want one from +%s to +%s", got.Outages, down.Sub(Start), up.Sub(Start))
	}
}

// testAvailabilityReregistered: the time between a deregistration and the
// registration again counts as deregistered, for the server; the skill's
// other provider, up all along, keeps the skill available.
func testAvailabilityReregistered(e *env) {
	srv := e.registerNew(e.info("avail-rereg", "s"))
	e.registerNew(e.info("avail-other", "s"))
	e.advance(10 * time.Minute)
	e.deregister(srv.ServerID)
	e.advance(15 * time.Minute)
	if _, created, _ := e.register(e.info("avail-rereg", "s")); created {
		e.t.Fatal("registered again: created a new server")
	}
	e.advance(35 * time.Minute) // no sweep: both stay healthy
	to := Start.Add(time.Hour)
	a := e.availability(srv.ServerID, registry.Window1h, to)
	want := registry.NewAvailability(registry.Window1h, Start, to,
		[4]int64{45 * 60e6, 0, 0, 15 * 60e6},
		[]registry.Outage{{From: Start.Add(10 * time.Minute), To: Start.Add(25 * time.Minute), Status: registry.StatusDeregistered}}, 3)
	e.wantAvailability("a server registered again", a, want)
	if *a.AvailableRatio != 0.75 {
		e.t.Fatalf("ratio %v, want 0.75", *a.AvailableRatio)
	}
	skill, err := e.store.SkillAvailability(e.ctx, e.tenant, "s", registry.AvailabilityRequest{Window: registry.Window1h, Now: to})
	if err != nil {
		e.t.Fatalf("skill: %v", err)
	}
	e.wantAvailability("a skill with another provider up", skill,
		registry.NewAvailability(registry.Window1h, Start, to, [4]int64{3600e6, 0, 0, 0}, nil, 1))
}

// testAvailabilityAtFrom: a transition exactly at the window's start
// decides the window from its first instant; the one before it does not.
func testAvailabilityAtFrom(e *env) {
	srv := e.registerNew(e.info("avail-from", "s"))
	e.advance(20 * time.Minute)
	_, ev := e.deregister(srv.ServerID)
	to := ev.OccurredAt.Add(time.Hour)
	e.advance(2 * time.Hour)
	want := registry.NewAvailability(registry.Window1h, ev.OccurredAt, to, [4]int64{0, 0, 0, 3600e6},
		[]registry.Outage{{From: ev.OccurredAt, To: to, Status: registry.StatusDeregistered}}, 1)
	e.wantAvailability("a deregistration at from", e.availability(srv.ServerID, registry.Window1h, to), want)
	if got := e.availability(srv.ServerID, registry.Window1h, to); *got.AvailableRatio != 0 {
		e.t.Fatalf("ratio %v, want 0", *got.AvailableRatio)
	}
	// A window that ends exactly at the registration observed nothing.
	none := e.availability(srv.ServerID, registry.Window1h, Start)
	if none.ObservedSeconds != 0 || none.AvailableRatio != nil || none.Transitions != 1 {
		e.t.Fatalf("window ending at the registration: %s, want nothing observed, ratio null, 1 transition", formatAvailability(none))
	}
}

// testAvailabilityRegisteredInside: a server registered inside the window
// counts from its registration, not from the window's start.
func testAvailabilityRegisteredInside(e *env) {
	e.advance(5 * time.Hour)
	srv := e.registerNew(e.info("avail-new", "s"))
	for range 60 {
		e.advance(Interval)
		e.heartbeat(srv.ServerID)
	}
	a := e.availability(srv.ServerID, registry.Window24h, time.Time{})
	if a.ObservedSeconds != 600 || *a.AvailableRatio != 1 || a.Seconds.Healthy != 600 || a.Transitions != 1 || !a.To.Equal(e.now()) {
		e.t.Fatalf("registered 10 minutes ago: %s, want 600 s observed, all healthy, to now", formatAvailability(a))
	}
	if a.Window != registry.Window24h || !a.From.Equal(e.now().Add(-24*time.Hour)) {
		e.t.Fatalf("window %s from +%s, want 24h", a.Window, a.From.Sub(Start))
	}
	// The default window is 24 h.
	if d := e.availability(srv.ServerID, "", time.Time{}); !reflect.DeepEqual(d, a) {
		e.t.Fatalf("default window: %s, want the 24h one", formatAvailability(d))
	}
}

// testAvailabilityIsolation: another tenant's server and skill are not
// found, nor are unknown ones; the ratios leave them out.
func testAvailabilityIsolation(e *env) {
	srv := e.registerNew(e.info("avail-mine", "mine"))
	other := uuid.New()
	_, err := e.store.ServerAvailability(e.ctx, other, srv.ServerID, registry.AvailabilityRequest{})
	if !errors.Is(err, registry.ErrNotFound) {
		e.t.Fatalf("another tenant's server: %v, want ErrNotFound", err)
	}
	if _, err := e.store.ServerAvailability(e.ctx, e.tenant, uuid.New(), registry.AvailabilityRequest{}); !errors.Is(err, registry.ErrNotFound) {
		e.t.Fatalf("unknown server: %v, want ErrNotFound", err)
	}
	for _, c := range []struct {
		tenant uuid.UUID
		name   string
	}{{other, "mine"}, {e.tenant, "nobody-offers-this"}} {
		if _, err := e.store.SkillAvailability(e.ctx, c.tenant, c.name, registry.AvailabilityRequest{}); !errors.Is(err, registry.ErrSkillNotFound) {
			e.t.Fatalf("skill %q of tenant %s: %v, want ErrSkillNotFound", c.name, c.tenant, err)
		}
	}
	ratios, err := e.store.AvailabilityRatios(e.ctx, other, []uuid.UUID{srv.ServerID}, registry.AvailabilityRequest{})
	if err != nil || len(ratios) != 0 {
		e.t.Fatalf("another tenant's ratios: %+v, %v; want none", ratios, err)
	}
	e.advance(time.Minute)
	ratios, err = e.store.AvailabilityRatios(e.ctx, e.tenant, []uuid.UUID{srv.ServerID, srv.ServerID}, registry.AvailabilityRequest{Window: registry.Window1h})
	if err != nil || !reflect.DeepEqual(ratios, []registry.AvailabilityRatio{{ServerID: srv.ServerID, ObservedSeconds: 60, AvailableRatio: ratio(1)}}) {
		e.t.Fatalf("ratios: %+v, %v; want one, 60 s all available", ratios, err)
	}
}
