package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// citusInterval is the heartbeat interval of the Citus worker test: a
// worker down for 30 intervals (15 s) is ten times the contract's 30 s at
// the default 10 s, in intervals.
const (
	citusInterval = 500 * time.Millisecond
	citusDown     = 30 * citusInterval
)

// Two mcpd replicas on a Citus cluster, a tenant on each worker. One
// worker stops for 30 intervals: its tenant's heartbeats answer 503 (never
// an error the contract does not allow), while the other tenant heartbeats,
// registers, has its silent server swept on time (its alert delivered)
// and its watch, on the replica that also serves the stopped tenant, goes
// on. When the worker
// returns: no false transition for either tenant's heartbeating servers;
// a replica is SIGKILLed and the watch resumes on the other; every event of
// the running tenant watched exactly once, in commit order, and each
// tenant's positions gapless.
func TestCitusWorkerStoppedAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCitus(t)
	db := c.NewDB(t)
	ctx := t.Context()

	// A tenant on each worker.
	tenants := c.TenantOnEachWorker(t, db)
	stopped, running := tenants[0], tenants[1]

	hook := newEventReceiver(t)
	args := []string{"--heartbeat-interval", citusInterval.String(), "--monitor-period", (citusInterval / 4).String(),
		"--alert-webhook-url", hook.srv.URL}
	a, b := startMcpd(t, db.AppURL, args...), startMcpd(t, db.AppURL, args...)
	sc, rc := a.client(t, stopped), b.client(t, running)
	watchA, watchB := a.client(t, running), b.client(t, running)
	for _, cl := range []*client.Client{sc, rc} {
		testwait.Until(t, "ready", pollCap, func() bool { return cl.Readyz(ctx) == nil })
	}
	sIDs := registerN(t, []*client.Client{sc}, "s", 3, 1)
	rIDs := registerN(t, []*client.Client{rc}, "r", 3, 1)

	// The running tenant's watch is on replica a, whose feed also follows
	// the stopped tenant (its heartbeats are held there).
	list, err := watchA.Servers(ctx, client.ListServersParams{})
	if err != nil {
		t.Fatal(err)
	}
	// The watch starts after the trail so far (nothing else writes now).
	base := len(trailOf(t, db, running))
	since := func() []uuid.UUID { return trailOf(t, db, running)[base:] }
	var watched collector
	watch := func(cl *client.Client, cursor string) (context.CancelFunc, chan error) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- cl.Watch(wctx, client.WatchParams{Cursor: cursor}, func(m client.WatchEvent) error {
				watched.mu.Lock()
				watched.last = m.ID
				watched.mu.Unlock()
				if !m.Bookmark {
					watched.add(m.Event.EventID)
				}
				return nil
			})
		}()
		return cancel, done
	}
	stopWatch, watchDone := watch(watchA, list.WatchCursor)

	sb := startBeater(t, sc, sIDs, citusInterval/2)
	rb := startBeater(t, rc, rIDs, citusInterval/2)
	time.Sleep(4 * citusInterval) // the heartbeats held, then written

	sb.phase.Store(1)
	rb.phase.Store(1)
	c.Workers[0].Stop(t)
	down := time.Now()
	// The running tenant registers a server that stays silent: it is swept
	// on time (degraded, unhealthy), and the watch on replica a sees it.
	silent, _, err := rc.Register(ctx, api.RegisterRequest{ModuleName: "quiet", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "q"}}}, "")
	if err != nil {
		t.Fatalf("register on the running worker while the other is down: %v", err)
	}
	testwait.Until(t, "the running tenant's silent server unhealthy", citusDown, func() bool {
		srv, err := rc.Server(ctx, silent.ServerID)
		return err == nil && srv.Status == registry.StatusUnhealthy
	})
	// Its alert is delivered while the other worker is down (until
	// 2026-12-07 the claim read every shard, and no tenant's alert went
	// out until the worker returned).
	var unhealthy uuid.UUID
	testwait.Until(t, "the running tenant's unhealthy alert delivered while the other worker is down", citusDown, func() bool {
		_ = db.Admin.QueryRow(ctx, `SELECT event_id FROM mcp_audit_events
			WHERE tenant_id = $1 AND server_id = $2 AND kind = 'mcp.server.unhealthy'`, running, silent.ServerID).Scan(&unhealthy)
		return unhealthy != uuid.Nil && hook.count(unhealthy) > 0
	})
	// And acknowledged: the round's skill alert records reached no other
	// worker (a record that did failed the round, which sent it again).
	testwait.Until(t, "the running tenant's unhealthy alert acknowledged", citusDown, func() bool {
		var acked bool
		_ = db.Admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mcp_alert_positions p
			JOIN mcp_audit_events a ON a.tenant_id = $1 AND a.tenant_id = p.tenant_id AND a.event_id = $2
			WHERE p.tenant_id = $1 AND p.position >= a.position)`, running, unhealthy).Scan(&acked)
		return acked
	})
	testwait.Until(t, "the watch goes on", citusDown, func() bool {
		return len(watched.snapshot()) == len(since()) && len(watched.snapshot()) >= 3
	})
	if _, err := rc.Deregister(ctx, silent.ServerID); err != nil {
		t.Fatal(err)
	}
	// Ready (a sweep that two of a loaded machine's sweeps in a row ran
	// out of time may say not ready for a moment).
	for _, cl := range []*client.Client{rc, watchA} {
		testwait.Until(t, "each replica ready while one worker is down", pollCap, func() bool { return cl.Readyz(ctx) == nil })
	}
	time.Sleep(time.Until(down.Add(citusDown)))

	c.Workers[0].Start(t)
	up := time.Now()
	sb.phase.Store(2)
	rb.phase.Store(2)
	testwait.Until(t, "the stopped tenant's heartbeats answered again", pollCap, func() bool {
		return sb.allOKSince(sIDs, up)
	})
	time.Sleep(6 * citusInterval) // past 3I of the stopped tenant's servers

	// The heartbeats stop (the stopped tenant's go through a, which dies
	// next); a replica dies; the watch resumes on the other from its last
	// id.
	sb.halt()
	rb.halt()
	a.kill(t)
	// The client would retry the dead replica for ever: the watcher moves.
	stopWatch()
	<-watchDone
	watched.mu.Lock()
	last := watched.last
	watched.mu.Unlock()
	stopWatch, watchDone = watch(watchB, last)
	defer func() {
		stopWatch()
		<-watchDone
	}()
	if _, err := rc.Deregister(ctx, rIDs[0]); err != nil {
		t.Fatal(err)
	}

	outcomes, bad := sb.report()
	if len(bad) > 0 {
		t.Fatalf("the stopped tenant's heartbeats got answers the contract does not allow: %v", bad)
	}
	if outcomes[1]["503"] == 0 {
		t.Fatalf("no heartbeat of the stopped tenant answered 503 while its worker was down: %v", outcomes[1])
	}
	rOutcomes, rBad := rb.report()
	if len(rBad) > 0 || len(rOutcomes[1]) != 1 || rOutcomes[1]["ok"] == 0 {
		t.Fatalf("the running tenant's heartbeats while the other worker was down: %v %v; want every one ok",
			rOutcomes[1], rBad)
	}
	// A mark is false when the server's beater had a heartbeat answered
	// (ok or 503) within the lag the mark needs; without one, a loaded
	// machine kept the server itself silent that long (its beater starts
	// after both tenants registered, or was starved), and the mark is the
	// contract's (beater.marks).
	st := readState(t, db.Admin)
	late := 0
	for _, g := range []struct {
		b   *beater
		ids []uuid.UUID
	}{{sb, sIDs}, {rb, rIDs}} {
		m := g.b.marks(st, g.ids, 0, citusInterval)
		if m.degraded+m.unhealthy > 0 {
			t.Fatalf("servers heartbeating throughout were marked: %d degraded, %d unhealthy (worker down %s, up %s)",
				m.degraded, m.unhealthy, down.Format(time.RFC3339Nano), up.Format(time.RFC3339Nano))
		}
		late += m.lateDegraded + m.lateUnhealthy
	}
	want := since()
	testwait.Until(t, "the watch has every event", pollCap, func() bool { return len(watched.snapshot()) >= len(want) })
	if got := watched.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("watched %d events, the trail has %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	for _, tenant := range []uuid.UUID{stopped, running} {
		assertGapless(t, db.Admin, tenant)
	}
	t.Logf("worker down %s: stopped tenant %v, running tenant %v; %d events of the running tenant watched once; "+
		"%d servers marked after their own heartbeats were late", citusDown, outcomes, rOutcomes, len(want), late)
}
