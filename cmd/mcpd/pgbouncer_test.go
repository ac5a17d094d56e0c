package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// TestThroughPgBouncer runs two mcpd replicas whose --database-url is a
// pgbouncer in transaction mode, as the URL an operator gives: register,
// heartbeat, list for three tenants, none seeing another's servers; a
// silent server is swept unhealthy by the monitor, the watch and the audit
// trail agree, and its alert is delivered once; /readyz is 200 at the start
// and at the end. Before mcpd was pooler-safe every call answered 500
// (42P05), every sweep failed and /readyz said 200.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	c := pgtest.SharedEngine(t)
	bouncer := c.StartPgBouncer(t, pgtest.PgBouncerOptions{PoolSize: 4})
	db := c.NewDB(t)
	hook := newEventReceiver(t)
	url := bouncer.URL(db.AppURL)
	reps := []*proc{
		startMcpd(t, url, "--alert-webhook-url", hook.srv.URL),
		startMcpd(t, url, "--alert-webhook-url", hook.srv.URL),
	}
	ctx := context.Background()
	const tenants, modules = 3, 4
	type tenantRun struct {
		id      uuid.UUID
		clients []*client.Client
		servers []uuid.UUID
	}
	runs := make([]*tenantRun, tenants)
	for i := range runs {
		tr := &tenantRun{id: uuid.New()}
		for _, p := range reps {
			tr.clients = append(tr.clients, p.client(t, tr.id))
		}
		tr.servers = registerN(t, tr.clients, fmt.Sprintf("t%d", i), modules, 2)
		runs[i] = tr
	}
	// /readyz follows the monitor's last sweep, which a loaded machine
	// may have let run out of its time (the interval): it must be 200
	// again by the next ones.
	readyz := func(what string) {
		for _, p := range reps {
			cl := p.client(t, uuid.New())
			testwait.Poll(t, what, pollCap, func() error { return cl.Readyz(ctx) })
		}
	}
	readyz("readyz through pgbouncer")
	// Tenant 0's silent server is watched through the pooler too, from
	// the watch_cursor of its audit trail as listed now: the list and the
	// watch together miss nothing, however late the watch connects.
	silent := runs[0].servers[modules-1]
	before, err := runs[0].clients[0].Events(ctx, client.ListEventsParams{ServerID: silent.String(), Limit: 100})
	if err != nil {
		t.Fatalf("audit list through pgbouncer: %v", err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := make(chan registry.Event, 100)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- runs[0].clients[1].Watch(wctx, client.WatchParams{ServerID: silent.String(), Cursor: before.WatchCursor},
			func(m client.WatchEvent) error {
				if !m.Bookmark {
					watched <- m.Event
				}
				return nil
			})
	}()
	// Every server but the last of tenant 0 heartbeats for 5 intervals.
	for range 10 {
		for _, tr := range runs {
			for k, id := range tr.servers {
				if id == silent {
					continue
				}
				if _, err := tr.clients[k%len(tr.clients)].Heartbeat(ctx, id); err != nil {
					t.Fatalf("heartbeat through pgbouncer: %v", err)
				}
			}
		}
		time.Sleep(e2eInterval / 2)
	}
	// Each tenant lists its own servers only, the silent one unhealthy and
	// the others healthy. The monitor marks the silent one when a sweep
	// runs, and on a loaded machine the rounds above may have ended more
	// than 2I ago: the others heartbeat again right before each listing,
	// and the listing is retried until the sweep has come.
	for i, tr := range runs {
		testwait.Poll(t, fmt.Sprintf("tenant %d lists the silent server unhealthy, the others healthy", i), pollCap, func() error {
			for k, id := range tr.servers {
				if id == silent {
					continue
				}
				if _, err := tr.clients[k%len(tr.clients)].Heartbeat(ctx, id); err != nil {
					t.Fatalf("heartbeat through pgbouncer: %v", err)
				}
			}
			for _, cl := range tr.clients {
				list, err := cl.Servers(ctx, client.ListServersParams{Limit: 100})
				if err != nil {
					t.Fatalf("list through pgbouncer: %v", err)
				}
				if len(list.Servers) != modules {
					t.Fatalf("tenant %d lists %d servers, want its own %d", i, len(list.Servers), modules)
				}
				for _, s := range list.Servers {
					if s.TenantID != tr.id {
						t.Fatalf("tenant %d lists %s of tenant %s", i, s.ModuleName, s.TenantID)
					}
					want := registry.StatusHealthy
					if s.ServerID == silent {
						want = registry.StatusUnhealthy
					}
					if s.Status != want {
						return fmt.Errorf("%s is %s, want %s", s.ModuleName, s.Status, want)
					}
				}
			}
			return nil
		})
		if _, err := tr.clients[0].Server(ctx, runs[(i+1)%tenants].servers[0]); err == nil {
			t.Fatalf("tenant %d reads another tenant's server", i)
		}
	}
	// The watch follows the silent server to unhealthy: after what the
	// audit list showed, the rest of its trail, ending in unhealthy. A
	// sweep that ran late by an interval or more takes it from healthy
	// straight to unhealthy (API.md: the status is computed from the lag
	// at the sweep), so a degraded is not required, only its place.
	seen := slices.Clone(before.Events)
	for len(seen) == 0 || seen[len(seen)-1].Kind != registry.KindUnhealthy {
		select {
		case ev := <-watched:
			seen = append(seen, ev)
		case <-time.After(pollCap):
			t.Fatalf("the audit list and the watch through pgbouncer saw %s, want it to end in unhealthy", eventKinds(seen))
		}
	}
	var alertID uuid.UUID
	testwait.Until(t, "the silent server's alert delivered", pollCap, func() bool {
		_ = db.Admin.QueryRow(ctx, `SELECT event_id FROM mcp_audit_events WHERE server_id = $1 AND kind = 'mcp.server.unhealthy'`,
			silent).Scan(&alertID)
		return alertID != uuid.Nil && hook.count(alertID) > 0
	})
	testwait.Throughout(t, 5*e2eInterval, func() { // a duplicate would show
		if n := hook.count(alertID); n != 1 {
			t.Fatalf("the alert was delivered %d times, want once", n)
		}
		select {
		case ev := <-watched:
			t.Fatalf("the watch through pgbouncer saw %s after %s", ev.Kind, eventKinds(seen))
		default:
		}
	})
	stopWatch()
	if err := <-watchDone; err != nil {
		t.Fatalf("watch through pgbouncer: %v", err)
	}
	st := readState(t, db.Admin)
	assertConsistent(t, st, nil)
	// The silent server's whole trail: registered, [degraded], unhealthy,
	// each once; and the audit list and the watch gave exactly it, in order.
	evs := st.events[silent]
	if tr := trail(evs); tr != "registered degraded unhealthy" && tr != "registered unhealthy" {
		t.Fatalf("the silent server's trail is %q, want registered [degraded] unhealthy", tr)
	}
	if len(seen) != len(evs) {
		t.Fatalf("the audit list and the watch through pgbouncer saw %s, the trail is %q", eventKinds(seen), trail(evs))
	}
	for k, e := range evs {
		if seen[k].EventID != e.id {
			t.Fatalf("event %d of the audit list and the watch through pgbouncer is %s %s, the trail's is %s %s",
				k, seen[k].Kind, seen[k].EventID, e.kind, e.id)
		}
	}
	readyz("readyz through pgbouncer at the end")
	for _, p := range reps {
		assertNoPanic(t, "mcpd", p.stderr.String())
		// A pooler-unsafe statement's 42P05 among the errors that fail.
		assertNoErrorLogs(t, "mcpd through pgbouncer", p.stderr.String())
	}
}

// eventKinds is events as "[registered degraded unhealthy]".
func eventKinds(events []registry.Event) string {
	kinds := make([]string, len(events))
	for i, e := range events {
		kinds[i] = strings.TrimPrefix(string(e.Kind), "mcp.server.")
	}
	return "[" + strings.Join(kinds, " ") + "]"
}
