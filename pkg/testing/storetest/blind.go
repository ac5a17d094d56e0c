package storetest

import (
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Blind-window protection and the live counts of the mass-loss check.
var blindCases = []testCase{
	{"blind_window_spares_servers", blindWindowSparesServers},
	{"blind_window_reported_once", blindWindowReportedOnce},
	{"no_blind_window_when_sweeping_on_time", noBlindWindowOnTime},
	{"blind_rule_off", blindRuleOff},
	{"first_sweep_is_not_blind", firstSweepIsNotBlind},
	{"dead_server_marked_after_blindness", deadServerMarkedAfterBlindness},
	{"live_counts", liveCounts},
}

const blindAfter = 2 * Interval // as a monitor with a 5 s period and I = 10 s would use

// sweepGuarded sweeps at the clock's now with the blind-window rule.
func (e *env) sweepGuarded(after time.Duration) store.SweepResult {
	e.t.Helper()
	res, err := e.store.Sweep(e.ctx, store.SweepRequest{Now: e.now(), Interval: Interval, Limit: 1000, BlindAfter: after})
	if err != nil {
		e.t.Fatalf("guarded sweep at %s: %v", e.now().Format(time.RFC3339Nano), err)
	}
	return res
}

// A registry blind for a minute moves no one when sight returns: every
// server gets its full intervals from the end of the window.
func blindWindowSparesServers(e *env) {
	srv := e.registerNew(e.info("calendar", "search"))
	e.sweepGuarded(blindAfter) // t=0: the last successful sweep
	e.advance(60 * time.Second)
	res := e.sweepGuarded(blindAfter)
	if len(res.Events) != 0 {
		e.t.Fatalf("sweep right after a blind minute moved %d servers, want none", len(res.Events))
	}
	if res.Opened == nil || !res.Opened.From.Equal(Start) || !res.Opened.Until.Equal(Start.Add(60*time.Second)) {
		e.t.Fatalf("blind window %+v, want from %s until %s", res.Opened, Start, Start.Add(60*time.Second))
	}
	e.wantStatus(srv.ServerID, registry.StatusHealthy)
	// The server heartbeats within its intervals after sight returns.
	e.advance(15 * time.Second)
	if evs := e.sweepGuarded(blindAfter).Events; len(evs) != 0 {
		e.t.Fatalf("1.5 I after the window: %d transitions, want none", len(evs))
	}
	e.heartbeat(srv.ServerID)
	e.wantStatus(srv.ServerID, registry.StatusHealthy)
	if skills := e.skills(srv.ServerID); !skills[0].Available {
		e.t.Fatalf("skill unavailable after a blind window: %+v", skills[0])
	}
}

func blindWindowReportedOnce(e *env) {
	e.registerNew(e.info("calendar"))
	e.sweepGuarded(blindAfter)
	e.advance(time.Minute)
	if e.sweepGuarded(blindAfter).Opened == nil {
		e.t.Fatal("no blind window after a minute without sweeps")
	}
	for range 3 {
		e.advance(5 * time.Second)
		if w := e.sweepGuarded(blindAfter).Opened; w != nil {
			e.t.Fatalf("blind window %+v reported again", w)
		}
	}
}

// Sweeps every 5 s: the rule changes nothing, thresholds are as ever.
func noBlindWindowOnTime(e *env) {
	srv := e.registerNew(e.info("calendar"))
	var degradedAt, unhealthyAt time.Duration
	for at := time.Duration(0); at <= 35*time.Second; at += 5 * time.Second {
		res := e.sweepGuarded(blindAfter)
		if res.Opened != nil {
			e.t.Fatalf("blind window %+v while sweeping every 5 s", res.Opened)
		}
		for _, ev := range res.Events {
			switch ev.Kind {
			case registry.KindDegraded:
				degradedAt = at
			case registry.KindUnhealthy:
				unhealthyAt = at
			}
		}
		e.advance(5 * time.Second)
	}
	if degradedAt != 20*time.Second || unhealthyAt != 30*time.Second {
		e.t.Fatalf("degraded at %s, unhealthy at %s; want 20s and 30s", degradedAt, unhealthyAt)
	}
	e.wantStatus(srv.ServerID, registry.StatusUnhealthy)
}

func blindRuleOff(e *env) {
	srv := e.registerNew(e.info("calendar"))
	e.sweepGuarded(0)
	e.advance(time.Minute)
	res := e.sweepGuarded(0)
	if res.Opened != nil || len(res.Events) != 1 || res.Events[0].Kind != registry.KindUnhealthy {
		e.t.Fatalf("rule off: %+v, want one unhealthy event and no window", res)
	}
	e.wantStatus(srv.ServerID, registry.StatusUnhealthy)
}

// With no sweep ever recorded there is no window to measure.
func firstSweepIsNotBlind(e *env) {
	e.registerNew(e.info("calendar"))
	e.advance(35 * time.Second)
	res := e.sweepGuarded(blindAfter)
	if res.Opened != nil || len(res.Events) != 1 {
		e.t.Fatalf("first guarded sweep: %+v, want one transition and no window", res)
	}
}

// A server that really died is still marked: at 2I and 3I after the end of
// the blindness, later by at most the window plus the silence it already
// had when the window began.
func deadServerMarkedAfterBlindness(e *env) {
	srv := e.registerNew(e.info("calendar", "search"))
	e.sweepGuarded(blindAfter)
	e.advance(5 * time.Second)
	e.sweepGuarded(blindAfter) // t=5 s, the last sweep before the window
	e.advance(40 * time.Second)
	if res := e.sweepGuarded(blindAfter); res.Opened == nil || len(res.Events) != 0 { // t=45 s
		e.t.Fatalf("after the window: %+v", res)
	}
	var marks []string
	for at := 50 * time.Second; at <= 80*time.Second; at += 5 * time.Second {
		e.advance(5 * time.Second)
		for _, ev := range e.sweepGuarded(blindAfter).Events {
			marks = append(marks, string(ev.Kind)+"@"+at.String())
		}
	}
	want := []string{"mcp.server.degraded@1m5s", "mcp.server.unhealthy@1m15s"}
	if len(marks) != 2 || marks[0] != want[0] || marks[1] != want[1] {
		e.t.Fatalf("marks %v, want %v (2I and 3I after the window ended at 45s)", marks, want)
	}
	if skills := e.skills(srv.ServerID); skills[0].Available {
		e.t.Fatal("skill still available after the late unhealthy mark")
	}
}

func liveCounts(e *env) {
	lc := e.store
	a := e.registerNew(e.info("a"))
	e.registerNew(e.info("b"))
	e.deregister(a.ServerID)
	got, err := lc.LiveCounts(e.ctx, []uuid.UUID{e.tenant})
	if err != nil || got[e.tenant] != 1 {
		e.t.Fatalf("live counts %v %v, want 1", got, err)
	}
}
