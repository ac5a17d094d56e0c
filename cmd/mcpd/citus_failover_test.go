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
	"github.com/jackc/pgx/v5/pgxpool"

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
// worker's tenant's answer 503 while it is down, the other tenant's 200
// throughout), the failed tenant's heartbeats and registrations go on on
// the promoted worker, and each tenant's positions stay gapless.
func TestCitusWorkerFailoverOverHTTP(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCitus(t)
	db := c.NewDB(t)
	standby := c.WorkerStandby(t, 0, true)
	citusFailoverOverHTTP(t, c, db, db.AppURL, []bool{false, true}, func(t *testing.T, _ []*client.Client) *pgxpool.Pool {
		c.FailOverWorker(t, 0, db.Name, standby)
		return db.Admin
	})
}

// The same with the coordinator: it crashes, and after three intervals
// its synchronous standby is promoted and the cluster told its address
// (citus_update_node), mcpd reaching it through a two-host URL with
// target_session_attrs=read-write. Both replicas answer /readyz 503
// meanwhile; both tenants' heartbeats answer 503 (or 200, held, until a
// flush fails) and 200 after; the rest as for a worker.
func TestCitusCoordinatorFailoverOverHTTP(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCitus(t)
	db := c.NewDB(t)
	old := c.Coordinator
	standby := c.CoordinatorStandby(t, true)
	url := twoHostURL(t, db.AppURL, old, standby)
	citusFailoverOverHTTP(t, c, db, url, []bool{false, false}, func(t *testing.T, replicas []*client.Client) *pgxpool.Pool {
		old.Crash(t)
		// As a failover manager would, promote only after a while:
		// meanwhile neither replica is ready.
		testwait.Throughout(t, 3*citusInterval, func() {
			for _, cl := range replicas {
				if err := cl.Readyz(t.Context()); !isUnavailable(err) {
					t.Fatalf("readyz with no coordinator: %v; want 503", err)
				}
			}
		})
		c.PromoteCoordinator(t, db.Name, standby)
		admin, err := pgxpool.New(t.Context(), standby.DBURL(db.Name, false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(admin.Close)
		return admin
	})
}

// citusFailoverOverHTTP runs two mcpd replicas on url, a tenant on each
// of c's workers, and calls failover, which returns an admin pool of db
// after it and is given a client of each replica; up[i] says that tenant
// i's heartbeats answer 200 throughout.
func citusFailoverOverHTTP(t *testing.T, c *pgtest.Citus, db *pgtest.DB, url string, up []bool,
	failover func(t *testing.T, replicas []*client.Client) *pgxpool.Pool) {
	ctx := t.Context()
	tenants := c.TenantOnEachWorker(t, db)
	admin := db.Admin

	args := []string{"--heartbeat-interval", citusInterval.String(), "--monitor-period", (citusInterval / 4).String()}
	replicas := []*proc{startMcpd(t, url, args...), startMcpd(t, url, args...)}
	type tenantRun struct {
		tenant uuid.UUID
		cl     *client.Client // writes, on replica i
		ids    []uuid.UUID
		beat   *beater
		// The tenant's watch, on the other replica, from a list's cursor:
		// the tenant's events after it.
		watchCl *client.Client
		cursor  string // the list's, before the failover
		base    int    // the trail's length at the list
		w       *expiringWatch
	}
	runs := make([]*tenantRun, len(tenants))
	for i, tenant := range tenants {
		r := &tenantRun{tenant: tenant, cl: replicas[i%2].client(t, tenant), watchCl: replicas[(i+1)%2].client(t, tenant)}
		testwait.Until(t, "ready", pollCap, func() bool { return r.cl.Readyz(ctx) == nil })
		r.ids = registerN(t, []*client.Client{r.cl}, "s", 3, 1)
		r.beat = startBeater(t, r.cl, r.ids, citusInterval/2)
		runs[i] = r
	}
	for _, r := range runs {
		testwait.Until(t, "every server heartbeated", pollCap, func() bool { return r.beat.allOKSince(r.ids, time.Time{}) })
		list, base := stableList(t, admin, r.watchCl, r.tenant)
		r.cursor, r.base, r.w = list.WatchCursor, base, startExpiringWatch(ctx, r.watchCl, list.WatchCursor)
	}
	// An event of each tenant before the failover, which its watch sees.
	for _, r := range runs {
		registerN(t, []*client.Client{r.cl}, "before", 1, 1)
		testwait.Until(t, "the watch has the event before the failover", pollCap, func() bool {
			return len(r.w.got.snapshot()) >= len(trailIn(t, admin, r.tenant))-r.base
		})
	}

	for _, r := range runs {
		r.beat.phase.Store(1)
	}
	start := time.Now()
	admin = failover(t, []*client.Client{runs[0].cl, runs[1].cl})
	promoted := time.Now()
	for _, r := range runs {
		r.beat.phase.Store(2)
	}
	t.Logf("failed over in %v", promoted.Sub(start).Round(time.Millisecond))

	// Every watch ends with 410 once, after its tenant's events so far
	// exactly once, in commit order.
	for _, r := range runs {
		testwait.Until(t, "the watch answered 410 after the failover", pollCap, func() bool { return r.w.expiredCount() > 0 })
		if err := r.w.end(); err != nil {
			t.Fatalf("tenant %s's watch: %v", r.tenant, err)
		}
		got, want := r.w.got.snapshot(), trailIn(t, admin, r.tenant)[r.base:]
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) || len(got) == 0 {
			t.Fatalf("tenant %s: watched %d events before the 410, the trail has %d after the list; first difference at %d",
				r.tenant, len(got), len(want), firstDiff(got, want))
		}
		// A cursor from before the failover answers 410 too.
		old := startExpiringWatch(ctx, r.watchCl, r.cursor)
		testwait.Until(t, "the old cursor answered 410", pollCap, func() bool { return old.expiredCount() > 0 })
		if err := old.end(); err != nil {
			t.Fatal(err)
		}
		if n := len(old.got.snapshot()); n > 0 {
			t.Fatalf("tenant %s: a cursor from before the failover was answered %d events, then 410", r.tenant, n)
		}
	}

	// Heartbeats go on after the failover; watches from lists read now
	// have every later event exactly once.
	for _, r := range runs {
		testwait.Until(t, "the heartbeats answered again", citusDown, func() bool { return r.beat.allOKSince(r.ids, promoted) })
	}
	for _, r := range runs {
		list, base := stableList(t, admin, r.watchCl, r.tenant)
		r.base, r.w = base, startExpiringWatch(ctx, r.watchCl, list.WatchCursor)
	}
	for _, r := range runs {
		id := registerN(t, []*client.Client{r.cl}, "after", 1, 1)[0]
		if _, err := r.cl.Deregister(ctx, id); err != nil {
			t.Fatalf("deregister after the failover: %v", err)
		}
	}
	time.Sleep(6 * citusInterval) // past 3I: time for the monitor to mark anyone it would
	for _, r := range runs {
		r.beat.halt()
	}
	for _, r := range runs {
		want := trailIn(t, admin, r.tenant)[r.base:]
		testwait.Until(t, "the watch after the failover has every event", pollCap, func() bool {
			return len(r.w.got.snapshot()) >= len(want)
		})
		if err := r.w.end(); err != nil {
			t.Fatalf("tenant %s's watch after the failover: %v", r.tenant, err)
		}
		if got := r.w.got.snapshot(); !slices.Equal(got, want) || r.w.expiredCount() > 0 || len(got) < 2 {
			t.Fatalf("tenant %s after the failover: watched %d events (410: %d), the trail has %d; first difference at %d",
				r.tenant, len(got), r.w.expiredCount(), len(want), firstDiff(got, want))
		}
	}

	st := readState(t, admin)
	outcomes := make([][3]map[string]int, len(runs))
	for i, r := range runs {
		out, bad := r.beat.report()
		if len(bad) > 0 {
			t.Fatalf("tenant %s's heartbeats got answers the contract does not allow: %v", r.tenant, bad)
		}
		for outcome := range out[1] {
			if up[i] && outcome != statusOf(nil) {
				t.Fatalf("tenant %s's heartbeats during the failover: %v; want every one ok", r.tenant, out[1])
			}
		}
		if m := r.beat.marks(st, r.ids, 0, citusInterval); m.degraded+m.unhealthy > 0 {
			t.Fatalf("tenant %s: servers heartbeating throughout were marked: %d degraded, %d unhealthy (failover %s to %s)",
				r.tenant, m.degraded, m.unhealthy, start.Format(time.RFC3339Nano), promoted.Format(time.RFC3339Nano))
		}
		assertGapless(t, admin, r.tenant)
		outcomes[i] = out
	}
	t.Logf("heartbeats before, during and after, by tenant: %v", outcomes)
}

// stableList reads cl's tenant's list with no event committed beside it:
// the list, and how many events the tenant's trail had at it. A list
// answered 503 (just after a failover, a pool's connection to the node
// that is gone) is asked again.
func stableList(t *testing.T, admin *pgxpool.Pool, cl *client.Client, tenant uuid.UUID) (apiwire.ServerList, int) {
	t.Helper()
	var (
		list apiwire.ServerList
		base int
	)
	testwait.Until(t, "a list with the tenant's trail still", pollCap, func() bool {
		before := len(trailIn(t, admin, tenant))
		var err error
		list, err = cl.Servers(t.Context(), client.ListServersParams{})
		if err != nil && !isUnavailable(err) {
			t.Fatalf("list: %v", err)
		}
		base = before
		return err == nil && len(trailIn(t, admin, tenant)) == before
	})
	return list, base
}

// assertGapless fails unless tenant's events hold positions 1, 2, ...
func assertGapless(t *testing.T, admin *pgxpool.Pool, tenant uuid.UUID) {
	t.Helper()
	rows, err := admin.Query(t.Context(), `SELECT position FROM mcp_audit_events WHERE tenant_id = $1 ORDER BY position`, tenant)
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
