package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/alert"
	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// eventReceiver is a webhook that counts the alert events it receives.
type eventReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	ids map[string]int
}

func newEventReceiver(t *testing.T) *eventReceiver {
	r := &eventReceiver{ids: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.ids[req.Header.Get(alert.HeaderEventID)]++
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *eventReceiver) count(id uuid.UUID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[id.String()]
}

// twoHostURL is url (of primary's port) naming both hosts, the primary
// first, with target_session_attrs=read-write: the libpq form that mcpd
// documents for failover.
func twoHostURL(t *testing.T, url string, primary, standby *pgtest.Cluster) string {
	t.Helper()
	one := fmt.Sprintf("127.0.0.1:%d", primary.Port())
	if !strings.Contains(url, one) {
		t.Fatalf("url %s does not name %s", url, one)
	}
	return strings.Replace(url, one, fmt.Sprintf("%s,127.0.0.1:%d", one, standby.Port()), 1) + "&target_session_attrs=read-write"
}

// TestFailover runs mcpd on a primary with a synchronous streaming standby,
// through a two-host URL with target_session_attrs=read-write, while
// servers register and heartbeat. The primary crashes (pg_ctl stop -m
// immediate) and the standby is promoted five intervals later: mcpd finds the new primary by
// itself; no heartbeating server is marked degraded or unhealthy (the blind
// window); no acknowledged registration is lost; every server's audit trail
// is whole with no event twice; the alert outbox carries on, delivering an
// alert raised before the failover and one raised after. First, an mcpd
// pointed at the standby alone answers writes and /readyz with 503.
func TestFailover(t *testing.T) {
	t.Parallel()
	const servers = 20
	primary := pgtest.NewCluster(t)
	db := primary.NewDB(t)
	standby := primary.StartStandby(t, true)
	ctx := context.Background()

	t.Run("standby alone is not ready", func(t *testing.T) {
		p := startMcpd(t, standby.DBURL(db.Name, true))
		c := p.client(t, uuid.New())
		if err := c.Readyz(ctx); !isUnavailable(err) {
			t.Fatalf("readyz on a standby: %v; want 503 with Retry-After", err)
		}
		_, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "on-standby", Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}}, "")
		if !isUnavailable(err) {
			t.Fatalf("register on a standby: %v; want 503 with Retry-After", err)
		}
		if _, err := c.Heartbeat(ctx, uuid.New()); !isUnavailable(err) {
			t.Fatalf("heartbeat on a standby: %v; want 503 with Retry-After", err)
		}
		assertNoPanic(t, "mcpd", p.stderr.String())
	})

	hook := newEventReceiver(t)
	p := startMcpd(t, twoHostURL(t, db.AppURL, primary, standby), "--alert-webhook-url", hook.srv.URL)
	tenant := uuid.New()
	c := p.client(t, tenant)
	testwait.Until(t, "ready on the primary", pollCap, func() bool { return c.Readyz(ctx) == nil })
	ids := registerN(t, []*client.Client{c}, "failover", servers, 1)
	// A watcher of the tenant follows the feed through the failover: it
	// resumes from its last id by itself; that is either honoured with no
	// gap or answered 410, never a silent gap.
	var (
		watchMu sync.Mutex
		watched []uuid.UUID
		expired bool
	)
	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		err := c.Watch(wctx, client.WatchParams{}, func(m client.WatchEvent) error {
			if !m.Bookmark {
				watchMu.Lock()
				watched = append(watched, m.Event.EventID)
				watchMu.Unlock()
			}
			return nil
		})
		var prob *api.Problem
		if errors.As(err, &prob) && prob.Status == http.StatusGone {
			watchMu.Lock()
			expired = true
			watchMu.Unlock()
			err = nil
		}
		watchDone <- err
	}()
	defer stopWatch()
	b := startBeater(t, c, ids, e2eInterval)
	testwait.Until(t, "every server heartbeated", pollCap, func() bool { return b.allOKSince(ids, time.Time{}) })
	// A server that goes silent before the failover: its alert is raised
	// and delivered on the primary.
	silentBefore := registerN(t, []*client.Client{c}, "silent-before", 1, 1)[0]
	var before uuid.UUID
	admin := db.Admin
	testwait.Until(t, "the silent server's alert delivered", pollCap, func() bool {
		_ = admin.QueryRow(ctx, `SELECT event_id FROM mcp_audit_events WHERE server_id = $1 AND kind = 'mcp.server.unhealthy'`,
			silentBefore).Scan(&before)
		return before != uuid.Nil && hook.count(before) > 0
	})

	// Registrations go on during the failover; those answered 2xx must
	// survive it.
	var (
		regMu    sync.Mutex
		acked    []uuid.UUID
		regStop  = make(chan struct{})
		regDone  = make(chan struct{})
		firstReg time.Time // first acknowledged registration after the promotion
		promoted time.Time
	)
	go func() {
		defer close(regDone)
		for i := 0; i < 10000; i++ {
			select {
			case <-regStop:
				return
			case <-time.After(e2eInterval / 4):
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			srv, _, err := c.Register(rctx, api.RegisterRequest{ModuleName: fmt.Sprintf("during-%04d", i), Version: "1.0.0",
				SupportedProtocols: []string{"2025-06-18"}}, "")
			cancel()
			regMu.Lock()
			if err == nil {
				acked = append(acked, srv.ServerID)
				if !promoted.IsZero() && firstReg.IsZero() {
					firstReg = time.Now()
				}
			}
			regMu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-regStop:
		default:
			close(regStop)
		}
		<-regDone
	}()

	var baseline int64
	if err := admin.QueryRow(ctx, `SELECT COALESCE(max(position), 0) FROM mcp_audit_events`).Scan(&baseline); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	time.Sleep(2 * e2eInterval) // registrations under way
	b.phase.Store(1)
	crashed := time.Now()
	primary.Crash(t)
	// As a failover manager would, promote only after a while (here five
	// intervals, longer than the 3I that makes a silent server unhealthy):
	// meanwhile mcpd is not ready and answers writes 503.
	testwait.Throughout(t, 5*e2eInterval-time.Since(crashed), func() {
		if err := c.Readyz(ctx); !isUnavailable(err) {
			t.Fatalf("readyz with no primary: %v; want 503", err)
		}
		if !p.running() {
			t.Fatalf("mcpd exited with no primary: %v", p.err)
		}
	})
	standby.Promote(t)
	regMu.Lock()
	promoted = time.Now()
	regMu.Unlock()
	b.phase.Store(2)
	testwait.Until(t, "ready on the new primary", pollCap, func() bool { return c.Readyz(ctx) == nil })
	ready := time.Since(promoted)
	testwait.Until(t, "every server heartbeated on the new primary", pollCap, func() bool { return b.allOKSince(ids, promoted) })
	heartbeated := time.Since(promoted)
	testwait.Until(t, "a registration on the new primary", pollCap, func() bool {
		regMu.Lock()
		defer regMu.Unlock()
		return !firstReg.IsZero()
	})

	// A server that goes silent after the failover: the outbox carries on.
	silentAfter := registerN(t, []*client.Client{c}, "silent-after", 1, 1)[0]
	newAdmin, err := pgxpool.New(ctx, standby.DBURL(db.Name, false))
	if err != nil {
		t.Fatal(err)
	}
	defer newAdmin.Close()
	var after uuid.UUID
	testwait.Until(t, "the alert raised after the failover delivered", pollCap, func() bool {
		_ = newAdmin.QueryRow(ctx, `SELECT event_id FROM mcp_audit_events WHERE server_id = $1 AND kind = 'mcp.server.unhealthy'`,
			silentAfter).Scan(&after)
		return after != uuid.Nil && hook.count(after) > 0
	})
	// Five more intervals: time for the monitor to mark anyone it would.
	time.Sleep(5 * e2eInterval)
	close(regStop)
	<-regDone
	b.halt()
	if !p.running() {
		t.Fatalf("mcpd exited: %v", p.err)
	}

	// The watcher: every event of the tenant after its first, in order,
	// once (or a prefix of them, then 410).
	trail := trailIn(t, newAdmin, tenant)
	testwait.Until(t, "the watcher caught up", pollCap, func() bool {
		watchMu.Lock()
		defer watchMu.Unlock()
		return expired || len(watched) > 0 && len(watched) >= len(trail)-slices.Index(trail, watched[0])
	})
	stopWatch()
	if err := <-watchDone; err != nil {
		t.Fatalf("watch across the failover: %v", err)
	}
	watchMu.Lock()
	start := slices.Index(trail, watched[0])
	if start < 0 {
		t.Fatalf("the first watched event %s is not in the trail", watched[0])
	}
	// Events may have committed after the trail was read: compare with the
	// trail as it is now, of which the watched events are the front.
	trail = trailIn(t, newAdmin, tenant)
	want := trail[start:]
	if len(watched) > len(want) || !slices.Equal(watched, want[:len(watched)]) {
		t.Fatalf("watched %d events across the failover, the trail has %d after the first (expired %v); first difference at %d",
			len(watched), len(want), expired, firstDiff(watched, want))
	}
	watchFigure := fmt.Sprintf("watch across the failover: %d events exactly once in commit order (410: %v)", len(watched), expired)
	watchMu.Unlock()

	out, bad := b.report()
	if len(bad) > 0 {
		t.Fatalf("%d answers outside the contract, first: %s", len(bad), bad[0])
	}
	st := readState(t, newAdmin)
	assertConsistent(t, st, nil)
	regMu.Lock()
	ackedN, firstWrite := len(acked), firstReg.Sub(promoted)
	for _, id := range acked {
		if _, ok := st.servers[id]; !ok {
			t.Fatalf("registration %s was acknowledged before the failover and is lost", id)
		}
	}
	regMu.Unlock()
	m := b.marks(st, ids, baseline, e2eInterval)
	if st.count(silentBefore, registry.KindUnhealthy) != 1 || st.count(silentAfter, registry.KindUnhealthy) != 1 {
		t.Fatalf("silent servers' unhealthy events: %d before, %d after; want one each",
			st.count(silentBefore, registry.KindUnhealthy), st.count(silentAfter, registry.KindUnhealthy))
	}
	metrics := get(t, "http://"+p.addr+"/metrics")
	t.Logf("FIGURE failover: primary crashed, standby promoted %s later; ready %s, every server heartbeated %s, "+
		"first registration acknowledged %s after the promotion; %d registrations acknowledged, none lost; "+
		"heartbeats during %v, after %v; falsely degraded %d/%d, falsely unhealthy %d/%d (marked after their own "+
		"late heartbeats: degraded %d, unhealthy %d); "+
		"alert before the failover delivered %d time(s), after %d time(s); %s; %s",
		promoted.Sub(crashed).Round(time.Millisecond), ready.Round(time.Millisecond), heartbeated.Round(time.Millisecond),
		firstWrite.Round(time.Millisecond), ackedN, out[1], out[2], m.degraded, servers, m.unhealthy, servers,
		m.lateDegraded, m.lateUnhealthy,
		hook.count(before), hook.count(after), strings.Join(grepLinesPrefix(metrics, "mcpd_blind_"), ", "), watchFigure)
	assertNoPanic(t, "mcpd", p.stderr.String())
	assertNoFalseUnhealthy(t, m, servers)
}
