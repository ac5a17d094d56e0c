package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// expiringWatch is a watch of one tenant that keeps what it received and
// whether it ended with 410.
type expiringWatch struct {
	got     collector
	mu      sync.Mutex
	expired int // 410 answers
	stop    context.CancelFunc
	done    chan error
}

// startExpiringWatch watches cl's tenant from cursor ("" : from now).
func startExpiringWatch(ctx context.Context, cl *client.Client, cursor string) *expiringWatch {
	w := &expiringWatch{done: make(chan error, 1)}
	wctx, cancel := context.WithCancel(ctx)
	w.stop = cancel
	go func() {
		err := cl.Watch(wctx, client.WatchParams{Cursor: cursor}, func(m client.WatchEvent) error {
			if !m.Bookmark {
				w.got.add(m.Event.EventID)
			}
			return nil
		})
		var prob *api.Problem
		if errors.As(err, &prob) && prob.Status == http.StatusGone {
			w.mu.Lock()
			w.expired++
			w.mu.Unlock()
			err = nil
		}
		w.done <- err
	}()
	return w
}

func (w *expiringWatch) expiredCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.expired
}

// end stops the watch and returns its error (nil: stopped, or ended by
// 410).
func (w *expiringWatch) end() error {
	w.stop()
	err := <-w.done
	w.done <- nil // a second end returns at once
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// A Citus worker fails over onto its synchronous standby (the worker
// stopped, the standby promoted, citus_update_node) under two mcpd
// replicas, a tenant on each worker, every server heartbeating: the
// cluster's history moved on, so each replica's watch, of the tenant on
// the failed worker and of the other, ends with 410 once, after the
// tenant's events so far exactly once; a cursor from before answers 410.
// A list read after it gives a cursor whose watch has every later event
// exactly once. No heartbeating server of either tenant is marked, no
// heartbeat gets an answer the contract does not allow (the failed
// worker's tenant's answer 503 while it is down), the failed tenant's
// heartbeats and registrations go on on the promoted worker, and each
// tenant's positions stay gapless.
func TestCitusWorkerFailoverOverHTTP(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCitus(t)
	db := c.NewDB(t)
	ctx := t.Context()
	tenants := c.TenantOnEachWorker(t, db)
	failed, running := tenants[0], tenants[1] // failed is on worker 0
	standby := c.WorkerStandby(t, 0, true)

	args := []string{"--heartbeat-interval", citusInterval.String(), "--monitor-period", (citusInterval / 4).String()}
	a, b := startMcpd(t, db.AppURL, args...), startMcpd(t, db.AppURL, args...)
	fc, rc := a.client(t, failed), b.client(t, running)
	for _, cl := range []*client.Client{fc, rc} {
		testwait.Until(t, "ready", pollCap, func() bool { return cl.Readyz(ctx) == nil })
	}
	fIDs := registerN(t, []*client.Client{fc}, "f", 3, 1)
	rIDs := registerN(t, []*client.Client{rc}, "r", 3, 1)
	fb := startBeater(t, fc, fIDs, citusInterval/2)
	rb := startBeater(t, rc, rIDs, citusInterval/2)
	testwait.Until(t, "every server heartbeated", pollCap, func() bool {
		return fb.allOKSince(fIDs, time.Time{}) && rb.allOKSince(rIDs, time.Time{})
	})

	// Each tenant's watch, on the replica of the other tenant's client
	// too, from a list's cursor: the tenant's events after it.
	type watched struct {
		tenant uuid.UUID
		cl     *client.Client
		cursor string // the list's, before the failover
		base   int    // the trail's length at the list
		w      *expiringWatch
	}
	var watches []*watched
	for _, g := range []struct {
		tenant uuid.UUID
		p      *proc
	}{{failed, b}, {running, a}} {
		cl := g.p.client(t, g.tenant)
		list, base := stableList(t, db, cl, g.tenant)
		watches = append(watches, &watched{tenant: g.tenant, cl: cl, cursor: list.WatchCursor, base: base,
			w: startExpiringWatch(ctx, cl, list.WatchCursor)})
	}
	// An event of each tenant before the failover, which its watch sees.
	for _, cl := range []*client.Client{fc, rc} {
		registerN(t, []*client.Client{cl}, "before", 1, 1)
	}
	for _, wt := range watches {
		testwait.Until(t, "the watch has the event before the failover", pollCap, func() bool {
			return len(wt.w.got.snapshot()) >= len(trailOf(t, db, wt.tenant))-wt.base
		})
	}

	fb.phase.Store(1)
	rb.phase.Store(1)
	start := time.Now()
	c.FailOverWorker(t, 0, db.Name, standby)
	promoted := time.Now()
	fb.phase.Store(2)
	rb.phase.Store(2)
	t.Logf("worker 0 failed over in %v", promoted.Sub(start).Round(time.Millisecond))

	// Every watch ends with 410 once, after its tenant's events so far
	// exactly once, in commit order.
	for _, wt := range watches {
		testwait.Until(t, "the watch answered 410 after the failover", pollCap, func() bool { return wt.w.expiredCount() > 0 })
		if err := wt.w.end(); err != nil {
			t.Fatalf("tenant %s's watch: %v", wt.tenant, err)
		}
		got, want := wt.w.got.snapshot(), trailOf(t, db, wt.tenant)[wt.base:]
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) || len(got) == 0 {
			t.Fatalf("tenant %s: watched %d events before the 410, the trail has %d after the list; first difference at %d",
				wt.tenant, len(got), len(want), firstDiff(got, want))
		}
		// A cursor from before the failover answers 410 too.
		old := startExpiringWatch(ctx, wt.cl, wt.cursor)
		testwait.Until(t, "the old cursor answered 410", pollCap, func() bool { return old.expiredCount() > 0 })
		if err := old.end(); err != nil {
			t.Fatal(err)
		}
		if n := len(old.got.snapshot()); n > 0 {
			t.Fatalf("tenant %s: a cursor from before the failover was answered %d events, then 410", wt.tenant, n)
		}
	}

	// The failed tenant's heartbeats go on on the promoted worker.
	testwait.Until(t, "the failed worker's tenant's heartbeats answered again", citusDown, func() bool {
		return fb.allOKSince(fIDs, promoted)
	})
	// Watches from lists read now have every later event exactly once.
	for _, wt := range watches {
		list, base := stableList(t, db, wt.cl, wt.tenant)
		wt.base, wt.w = base, startExpiringWatch(ctx, wt.cl, list.WatchCursor)
	}
	for _, cl := range []*client.Client{fc, rc} {
		id := registerN(t, []*client.Client{cl}, "after", 1, 1)[0]
		if _, err := cl.Deregister(ctx, id); err != nil {
			t.Fatalf("deregister after the failover: %v", err)
		}
	}
	time.Sleep(6 * citusInterval) // past 3I: time for the monitor to mark anyone it would
	fb.halt()
	rb.halt()
	for _, wt := range watches {
		want := trailOf(t, db, wt.tenant)[wt.base:]
		testwait.Until(t, "the watch after the failover has every event", pollCap, func() bool {
			return len(wt.w.got.snapshot()) >= len(want)
		})
		if err := wt.w.end(); err != nil {
			t.Fatalf("tenant %s's watch after the failover: %v", wt.tenant, err)
		}
		if got := wt.w.got.snapshot(); !slices.Equal(got, want) || wt.w.expiredCount() > 0 || len(got) < 2 {
			t.Fatalf("tenant %s after the failover: watched %d events (410: %d), the trail has %d; first difference at %d",
				wt.tenant, len(got), wt.w.expiredCount(), len(want), firstDiff(got, want))
		}
	}

	fOut, fBad := fb.report()
	rOut, rBad := rb.report()
	if len(fBad)+len(rBad) > 0 {
		t.Fatalf("heartbeats got answers the contract does not allow: %v %v", fBad, rBad)
	}
	for outcome := range rOut[1] {
		if outcome != statusOf(nil) {
			t.Fatalf("the running worker's tenant's heartbeats during the failover: %v; want every one ok", rOut[1])
		}
	}
	st := readState(t, db.Admin)
	for _, g := range []struct {
		b   *beater
		ids []uuid.UUID
	}{{fb, fIDs}, {rb, rIDs}} {
		if m := g.b.marks(st, g.ids, 0, citusInterval); m.degraded+m.unhealthy > 0 {
			t.Fatalf("servers heartbeating throughout were marked: %d degraded, %d unhealthy (failover %s to %s)",
				m.degraded, m.unhealthy, start.Format(time.RFC3339Nano), promoted.Format(time.RFC3339Nano))
		}
	}
	for _, tenant := range tenants {
		assertGapless(t, db, tenant)
	}
	t.Logf("failed worker's tenant: %v; running worker's tenant: %v", fOut, rOut)
}

// stableList reads cl's tenant's list with no event committed beside it:
// the list, and how many events the tenant's trail had at it.
func stableList(t *testing.T, db *pgtest.DB, cl *client.Client, tenant uuid.UUID) (apiwire.ServerList, int) {
	t.Helper()
	for range 50 {
		before := len(trailOf(t, db, tenant))
		list, err := cl.Servers(t.Context(), client.ListServersParams{})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if len(trailOf(t, db, tenant)) == before {
			return list, before
		}
	}
	t.Fatal("the tenant's trail moved on during 50 lists")
	return apiwire.ServerList{}, 0
}

// assertGapless fails unless tenant's events hold positions 1, 2, ...
func assertGapless(t *testing.T, db *pgtest.DB, tenant uuid.UUID) {
	t.Helper()
	rows, err := db.Admin.Query(t.Context(), `SELECT position FROM mcp_audit_events WHERE tenant_id = $1 ORDER BY position`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		if n++; p != n {
			t.Fatalf("tenant %s: event %d at position %d", tenant, n, p)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
