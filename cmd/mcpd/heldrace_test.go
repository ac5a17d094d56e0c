package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// TestHeldRecoveryRightAfterSweep shows the window between a sweep's
// commit and the change feed's read of it: a heartbeat in that window of a
// server the replica knows healthy is answered from memory (200, healthy)
// though the server is degraded, and its recovery commits only at the
// next flush; SIGKILL before that flush loses it. The contract: "A
// heartbeat that moves a status (from degraded or unhealthy) commits its
// transition and audit event before it is answered."
func TestHeldRecoveryRightAfterSweep(t *testing.T) {
	t.Parallel()
	const n = 20
	db := pgtest.NewDB(t)
	a := startHeld(t, db.AppURL)
	c := a.client(t, uuid.New())
	ctx := context.Background()
	ids := registerN(t, []*client.Client{c}, "race", n, 0)
	// Heartbeats until the replica holds them (it knows them healthy).
	for range 8 {
		for _, id := range ids {
			if _, err := c.Heartbeat(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(heldFlush / 2)
	}
	if flushWrites(t, a, okWrites) == 0 {
		t.Fatal("nothing held")
	}
	// Silence until the first sweep commits a degraded; at once a
	// heartbeat of each, then SIGKILL.
	var degraded []uuid.UUID
	testwait.Until(t, "a degraded server", pollCap, func() bool {
		rows, err := db.Admin.Query(ctx, `SELECT server_id FROM mcp_servers WHERE status = 'degraded'`)
		if err != nil {
			return false
		}
		defer rows.Close()
		for rows.Next() {
			var id uuid.UUID
			if rows.Scan(&id) == nil {
				degraded = append(degraded, id)
			}
		}
		return len(degraded) > 0
	})
	seen := time.Now()
	answered := map[uuid.UUID]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range degraded {
		wg.Go(func() {
			srv, err := c.Heartbeat(ctx, id)
			if err == nil && srv.Status == registry.StatusHealthy {
				mu.Lock()
				answered[id] = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	a.kill(t)
	st := readState(t, db.Admin)
	lost, late := 0, 0
	for id, at := range answered {
		var rec *auditEvent
		for i, e := range st.events[id] {
			if e.kind == registry.KindRecovered && e.occurred.After(seen.Add(-time.Second)) {
				rec = &st.events[id][i]
			}
		}
		switch {
		case rec == nil:
			lost++
			t.Errorf("%s: heartbeat answered 200 healthy %s after the sweep's degraded was seen; "+
				"no recovery in the audit trail after the kill (status %s, trail %s)",
				st.servers[id].module, at.Sub(seen), st.servers[id].status, trail(st.events[id]))
		case rec.occurred.After(at):
			late++
			t.Errorf("%s: recovery committed %s after the heartbeat was answered", st.servers[id].module, rec.occurred.Sub(at))
		}
	}
	t.Logf("%d degraded seen, %d recovery heartbeats answered 200 healthy; lost by the kill %d, committed after the answer %d",
		len(degraded), len(answered), lost, late)
}

// TestHeldHeartbeatAfterDeregistrationElsewhere deregisters servers
// through replica B and at once heartbeats them through replica A, which
// holds their heartbeats: the contract wants 409 (deregistered), as
// before issue 31; A answers from memory until its feed reads the
// deregistration.
func TestHeldHeartbeatAfterDeregistrationElsewhere(t *testing.T) {
	t.Parallel()
	const n = 20
	db := pgtest.NewDB(t)
	a := startHeld(t, db.AppURL)
	b := startHeld(t, db.AppURL)
	tenant := uuid.New()
	ca, cb := a.client(t, tenant), b.client(t, tenant)
	ctx := context.Background()
	ids := registerN(t, []*client.Client{ca}, "dereg", n, 0)
	for range 4 {
		for _, id := range ids {
			if _, err := ca.Heartbeat(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(heldFlush / 2)
	}
	wrong := 0
	for _, id := range ids {
		if _, err := cb.Deregister(ctx, id); err != nil {
			t.Fatal(err)
		}
		srv, err := ca.Heartbeat(ctx, id)
		if err == nil {
			wrong++
			t.Errorf("heartbeat through A right after B answered the deregistration: 200, status %s; want 409", srv.Status)
		}
	}
	t.Logf("%d of %d heartbeats answered 200 after the deregistration was answered", wrong, n)
}
