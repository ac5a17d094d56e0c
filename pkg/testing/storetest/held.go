package storetest

import (
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Held heartbeats (contract: "Heartbeats are held in memory; transitions
// are durable"): a replica writes the heartbeats it answered from memory
// with the time each was received, and the sweep allows for the window.
var heldCases = []testCase{
	{"HeldHeartbeatsWrittenAtReceivedTime", heldWrittenAtReceivedTime},
	{"HeldHeartbeatRecoversServerSweptMeanwhile", heldRecoversSwept},
	{"HeldHeartbeatsOfGoneServers", heldGoneServers},
	{"SweepGraceForHeldHeartbeats", sweepGrace},
}

func (e *env) writeHeld(tenant uuid.UUID, beats ...store.HeldHeartbeat) []store.HeldOutcome {
	e.t.Helper()
	outs, err := e.store.WriteHeldHeartbeats(e.ctx, tenant, beats)
	if err != nil {
		e.t.Fatalf("write held heartbeats: %v", err)
	}
	return outs
}

func held(id uuid.UUID, age time.Duration) store.HeldHeartbeat {
	return store.HeldHeartbeat{ServerID: id, Age: age}
}

// A healthy server's last heartbeat moves to when each heartbeat was
// received, never back, and nothing is returned for it.
func heldWrittenAtReceivedTime(e *env) {
	a := e.registerNew(e.info("calendar", "list-events"))
	b := e.registerNew(e.info("mail"))
	e.advance(5 * time.Second)
	if outs := e.writeHeld(e.tenant, held(a.ServerID, 300*time.Millisecond), held(b.ServerID, 0)); len(outs) != 0 {
		e.t.Fatalf("write of healthy servers returned %+v, want nothing", outs)
	}
	e.sameTime("a's last heartbeat", e.server(a.ServerID).LastHeartbeatAt, e.now().Add(-300*time.Millisecond))
	e.sameTime("b's last heartbeat", e.server(b.ServerID).LastHeartbeatAt, e.now())
	// An older heartbeat (a slower replica's window) never moves it back.
	e.advance(time.Second)
	e.writeHeld(e.tenant, held(b.ServerID, 2*time.Second))
	e.sameTime("b's last heartbeat after an older one", e.server(b.ServerID).LastHeartbeatAt, e.now().Add(-time.Second))
	e.wantKinds(a.ServerID, registry.KindRegistered)
	e.sweepNone()
}

// A server that a sweep moved after its heartbeat was held recovers in the
// write, with its event, skills back.
func heldRecoversSwept(e *env) {
	srv := e.registerNew(e.info("calendar", "list-events", "create-event"))
	e.advance(35 * time.Second)
	e.sweepOne() // unhealthy
	e.advance(200 * time.Millisecond)
	outs := e.writeHeld(e.tenant, held(srv.ServerID, 100*time.Millisecond))
	if len(outs) != 1 || outs[0].ServerID != srv.ServerID || outs[0].Err != nil || outs[0].Event == nil {
		e.t.Fatalf("write of an unhealthy server: %+v, want one recovery", outs)
	}
	e.checkEvent(*outs[0].Event, evWant{kind: registry.KindRecovered, srv: srv, from: registry.StatusUnhealthy,
		to: registry.StatusHealthy, at: e.now(), affected: []string{"create-event", "list-events"}})
	if outs[0].Server.Status != registry.StatusHealthy {
		e.t.Fatalf("server after the write: %s, want healthy", outs[0].Server.Status)
	}
	e.wantStatus(srv.ServerID, registry.StatusHealthy)
	e.wantSkills(srv.ServerID, reasons("", "list-events", "create-event"))
	e.wantKinds(srv.ServerID, registry.KindRegistered, registry.KindUnhealthy, registry.KindRecovered)
	e.sweepNone()
}

// A deregistered server, another tenant's and an unknown one are not
// written and are named; the other heartbeats of the call are.
func heldGoneServers(e *env) {
	live := e.registerNew(e.info("calendar"))
	gone := e.registerNew(e.info("mail"))
	e.deregister(gone.ServerID)
	other, _, _ := e.registerFor(uuid.New(), e.info("search"))
	unknown := uuid.New()
	e.advance(3 * time.Second)
	outs := e.writeHeld(e.tenant, held(live.ServerID, 0), held(gone.ServerID, 0), held(other.ServerID, 0),
		held(unknown, 0))
	got := map[uuid.UUID]error{}
	for _, o := range outs {
		got[o.ServerID] = o.Err
	}
	want := map[uuid.UUID]error{gone.ServerID: registry.ErrDeregistered, other.ServerID: registry.ErrNotFound,
		unknown: registry.ErrNotFound}
	if len(got) != len(want) {
		e.t.Fatalf("outcomes %+v, want %v", outs, want)
	}
	for id, w := range want {
		if !errors.Is(got[id], w) {
			e.t.Fatalf("outcome of %s: %v, want %v", id, got[id], w)
		}
	}
	e.sameTime("live server's heartbeat", e.server(live.ServerID).LastHeartbeatAt, e.now())
	e.wantStatus(gone.ServerID, registry.StatusDeregistered)
	if got := e.serverOf(other.TenantID, other.ServerID).LastHeartbeatAt; !got.Equal(Start) {
		e.t.Fatalf("another tenant's server was written: last heartbeat %s", got)
	}
}

// The sweep adds the grace to 2I and 3I: a server silent for 2I but not
// 2I plus the grace stays healthy.
func sweepGrace(e *env) {
	srv := e.registerNew(e.info("calendar"))
	grace := time.Second
	sweep := func() []registry.Event {
		e.t.Helper()
		res, err := e.store.Sweep(e.ctx, store.SweepRequest{Interval: Interval, Limit: 100, Grace: grace})
		if err != nil {
			e.t.Fatalf("sweep: %v", err)
		}
		return res.Events
	}
	e.advance(2*Interval + grace - time.Millisecond)
	if evs := sweep(); len(evs) != 0 {
		e.t.Fatalf("sweep inside the grace moved %s", describe(evs))
	}
	e.advance(time.Millisecond)
	if evs := sweep(); len(evs) != 1 || evs[0].Kind != registry.KindDegraded {
		e.t.Fatalf("sweep at 2I plus the grace: %s, want degraded", describe(evs))
	}
	e.advance(Interval - time.Millisecond)
	if evs := sweep(); len(evs) != 0 {
		e.t.Fatalf("sweep before 3I plus the grace moved %s", describe(evs))
	}
	e.advance(time.Millisecond)
	if evs := sweep(); len(evs) != 1 || evs[0].Kind != registry.KindUnhealthy || evs[0].ServerID != srv.ServerID {
		e.t.Fatalf("sweep at 3I plus the grace: %s, want unhealthy", describe(evs))
	}
}
