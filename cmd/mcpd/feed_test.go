package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// collector keeps what a watch or a pager received.
type collector struct {
	mu  sync.Mutex
	ids []uuid.UUID
	// last is the id (position) of the last message.
	last string
}

func (c *collector) add(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
}

func (c *collector) snapshot() []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

// trailOf returns tenant's event ids in commit order, as the database has
// them.
func trailOf(t *testing.T, db *pgtest.DB, tenant uuid.UUID) []uuid.UUID {
	t.Helper()
	return trailIn(t, db.Admin, tenant)
}

// trailIn is trailOf through the pool admin.
func trailIn(t *testing.T, admin *pgxpool.Pool, tenant uuid.UUID) []uuid.UUID {
	t.Helper()
	rows, err := admin.Query(context.Background(),
		`SELECT event_id FROM mcp_audit_events WHERE tenant_id = $1 ORDER BY position`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// Two replicas on one database; writers register and deregister through
// both at once while their monitors sweep; one watcher (moving from one
// replica to the other halfway, resuming from its last id) and one client
// paging the audit list by its cursors each see every event of the tenant
// exactly once, in commit order, and nothing of another tenant.
func TestWatchExactlyOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	watchExactlyOnceAcrossReplicas(t, pgtest.NewDB(t))
}

func watchExactlyOnceAcrossReplicas(t *testing.T, db *pgtest.DB) {
	reps := []*proc{startMcpd(t, db.AppURL), startMcpd(t, db.AppURL)}
	tenant, other := uuid.New(), uuid.New()
	clients := []*client.Client{reps[0].client(t, tenant), reps[1].client(t, tenant)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range clients {
		testwait.Eventually(t, "ready", func() bool { return c.Readyz(ctx) == nil })
	}

	// The watcher starts at the present, on replica 0.
	list, err := clients[0].Servers(ctx, client.ListServersParams{})
	if err != nil {
		t.Fatal(err)
	}
	var watched collector
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- clients[0].Watch(watchCtx, client.WatchParams{Cursor: list.WatchCursor}, func(m client.WatchEvent) error {
			watched.mu.Lock()
			watched.last = m.ID
			watched.mu.Unlock()
			if !m.Bookmark {
				if m.Event.ServerID == uuid.Nil || m.Event.TraceID == "" {
					return fmt.Errorf("event without server or trace: %+v", m.Event)
				}
				watched.add(m.Event.EventID)
			}
			return nil
		})
	}()
	// The pager follows the audit list on replica 1 while the writes go on.
	var paged collector
	pagerStop := make(chan struct{})
	pagerDone := make(chan error, 1)
	go func() {
		cursor := ""
		for {
			stopping := false
			select {
			case <-pagerStop:
				stopping = true
			default:
			}
			page, err := clients[1].Events(ctx, client.ListEventsParams{Cursor: cursor, Limit: 37})
			var prob *api.Problem
			if errors.As(err, &prob) && prob.Status == http.StatusServiceUnavailable {
				// A 503 (a read past the request timeout on a loaded
				// machine) is retried from the same cursor, as a client
				// would.
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if err != nil {
				pagerDone <- err
				return
			}
			for _, ev := range page.Events {
				paged.add(ev.EventID)
			}
			if page.NextCursor != nil {
				cursor = *page.NextCursor
				continue
			}
			cursor = page.WatchCursor
			if stopping {
				pagerDone <- nil
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// Another tenant's events interleave.
	oc := reps[1].client(t, other)
	const writers, each = 12, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			c := clients[w%2]
			for i := range each {
				var srv registry.Server
				err := retryWhileUnavailable(ctx, func() (err error) {
					srv, _, err = c.Register(ctx, api.RegisterRequest{
						ModuleName: fmt.Sprintf("w%02d-m%02d", w, i), Version: "1.0.0",
						SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "s"}},
					}, "")
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				if w == 0 && i%3 == 0 {
					if err := retryWhileUnavailable(ctx, func() error {
						_, _, err := oc.Register(ctx, api.RegisterRequest{ModuleName: fmt.Sprintf("o%02d", i),
							Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, "")
						return err
					}); err != nil {
						errs <- err
						return
					}
				}
				// Some live long enough for the monitors to move them.
				if i%2 == 0 {
					time.Sleep(150 * time.Millisecond)
				}
				if err := retryWhileUnavailable(ctx, func() error {
					_, err := clients[(w+i)%2].Deregister(ctx, srv.ServerID)
					return err
				}); err != nil {
					errs <- err
					return
				}
			}
		})
		if w == writers/2 {
			// Halfway: the watcher drops and resumes on the other replica.
			testwait.Eventually(t, "some events watched", func() bool { return len(watched.snapshot()) > 20 })
			stopWatch()
			if err := <-watchDone; err != nil {
				t.Fatalf("watch on replica 0: %v", err)
			}
			watched.mu.Lock()
			last := watched.last
			watched.mu.Unlock()
			watchCtx, stopWatch = context.WithCancel(ctx)
			go func() {
				watchDone <- clients[1].Watch(watchCtx, client.WatchParams{Cursor: last}, func(m client.WatchEvent) error {
					if !m.Bookmark {
						watched.add(m.Event.EventID)
					}
					return nil
				})
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("write: %v", err)
	}
	// The other tenant's servers go unhealthy in the background; ours are
	// all deregistered and make no more events.
	want := trailOf(t, db, tenant)
	if len(want) < 2*writers*each {
		t.Fatalf("trail: %d events, want at least %d", len(want), 2*writers*each)
	}
	testwait.Eventually(t, "the watcher has every event", func() bool { return len(watched.snapshot()) >= len(want) })
	// The pager, too, goes on from each answer's cursors until it has them:
	// an event of a transaction that was still open when a page was read
	// comes on a later page.
	testwait.Eventually(t, "the pager has every event", func() bool {
		select {
		case err := <-pagerDone:
			t.Fatalf("pager: %v", err)
		default:
		}
		return len(paged.snapshot()) >= len(want)
	})
	close(pagerStop)
	if err := <-pagerDone; err != nil {
		t.Fatalf("pager: %v", err)
	}
	stopWatch()
	if err := <-watchDone; err != nil {
		t.Fatalf("watch on replica 1: %v", err)
	}
	for name, got := range map[string][]uuid.UUID{"watched": watched.snapshot(), "paged": paged.snapshot()} {
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %d events, the trail has %d; first difference at %d", name, len(got), len(want), firstDiff(got, want))
		}
	}
	t.Logf("%d events watched and paged exactly once, in commit order", len(want))
}

func firstDiff(a, b []uuid.UUID) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A cursor that is no position of this tenant's trail is 400; a watch from
// a list's watch_cursor misses nothing; SIGTERM ends open streams and mcpd
// exits 0 within its shutdown timeout.
func TestWatchCursorsAndSIGTERM(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	// No transition but the registrations: at 200 ms a loaded machine let
	// alpha go degraded before the audit list, or before bravo's event.
	p := startMcpd(t, db.AppURL, "--shutdown-timeout", "3s", "--heartbeat-interval", "1h")
	tenant := uuid.New()
	c, oc := p.client(t, tenant), p.client(t, uuid.New())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	testwait.Eventually(t, "ready", func() bool { return c.Readyz(ctx) == nil })
	if _, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "alpha", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, ""); err != nil {
		t.Fatal(err)
	}
	audit, err := c.Events(ctx, client.ListEventsParams{})
	if err != nil || len(audit.Events) != 1 {
		t.Fatalf("audit: %+v %v", audit, err)
	}
	// Another tenant's cursor, and garbage, are refused before the stream.
	for _, cur := range []string{"not-a-cursor", audit.WatchCursor} {
		err := oc.Watch(ctx, client.WatchParams{Cursor: cur}, func(client.WatchEvent) error { return nil })
		var prob *api.Problem
		if !errors.As(err, &prob) || prob.Status != http.StatusBadRequest {
			t.Fatalf("watch from %q as another tenant: %v, want 400", cur, err)
		}
	}
	// From the audit list's watch_cursor: the next registration, first.
	got := make(chan client.WatchEvent, 10)
	ended := make(chan error, 1)
	go func() {
		ended <- c.Watch(ctx, client.WatchParams{Cursor: audit.WatchCursor, OnState: func(err error) {
			if err != nil {
				got <- client.WatchEvent{ID: "dropped: " + err.Error()}
			}
		}}, func(m client.WatchEvent) error {
			got <- m
			return nil
		})
	}()
	if _, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "bravo", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.Event.ModuleName != "bravo" || m.Event.Kind != registry.KindRegistered {
			t.Fatalf("first message: %+v", m)
		}
	case <-time.After(pollCap):
		t.Fatal("no event within 10s")
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(pollCap):
		t.Fatal("mcpd did not exit within 10s of SIGTERM with a stream open")
	}
	if p.err != nil {
		t.Fatalf("mcpd exit: %v", p.err)
	}
	select {
	case m := <-got:
		if m.ID == "" || len(m.ID) < 8 || m.ID[:8] != "dropped:" {
			t.Fatalf("after SIGTERM: %+v", m)
		}
	case <-time.After(pollCap):
		t.Fatal("the watch did not see its stream end")
	}
	t.Logf("mcpd exited 0 %s after SIGTERM with a watch stream open", time.Since(start).Round(time.Millisecond))
	cancel()
	if err := <-ended; err != nil {
		t.Fatalf("watch: %v", err)
	}
}

// retryWhileUnavailable calls call again while it answers 503 (a store past
// its deadline on a loaded machine, which the contract allows), for at most
// testwait.Cap; any other answer is returned. A write retried after a 503
// that did commit adds an event to the trail, which the watcher and the
// pager must then deliver too. Safe to call from any goroutine.
func retryWhileUnavailable(ctx context.Context, call func() error) error {
	deadline := time.Now().Add(testwait.Cap)
	for {
		err := call()
		var prob *api.Problem
		if err == nil || !errors.As(err, &prob) || prob.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
