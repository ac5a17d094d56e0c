package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestListThenWatchFromItsCursor(t *testing.T) {
	t.Parallel()
	src := newFake()
	src.cursor = "first-page-cursor"
	b := newBoard(t, src).load()
	if b.m.feed == nil || b.m.feedState != feedConnecting {
		t.Fatalf("no watch after the list (state %v)", b.m.feedState)
	}
	// The list's command batch starts the watch; run it for real.
	pipe := b.m.feed
	go pipe.run(src, "first-page-cursor")()
	msg := pipe.wait()()
	b.send(msg)
	b.contains("listed 10:00:30 · live")
	pipe.cancel()
	if got := src.watches; len(got) != 1 || got[0] != "first-page-cursor" {
		t.Fatalf("watched from %v, want the list's cursor", got)
	}
}

func TestFeedEventsUpdateRows(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	b.feed(feedMsg{stateSeen: true})

	b.now = t0.Add(2 * time.Second)
	b.events(event(registry.KindDegraded, "calendar", ptr(registry.StatusHealthy), registry.StatusDegraded, 0))
	b.contains(
		"healthy 1   degraded 2   unhealthy 1   deregistered 1",
		"> calendar           1.3.2       degraded      7s ago          2s ago",
		"10:00:30  calendar                     healthy → degraded           mcp.server.degraded",
	)
	b.lacks("no transitions since")

	// A recovery is a heartbeat: the age starts again.
	b.now = t0.Add(4 * time.Second)
	b.events(event(registry.KindRecovered, "search", ptr(registry.StatusUnhealthy), registry.StatusHealthy, -3*time.Second))
	b.contains("  search             0.9.1       healthy       1s ago          1s ago",
		"healthy 2   degraded 2   unhealthy 0   deregistered 1")

	// A deregistration marks the row; the status filter sees it at once.
	b.events(event(registry.KindDeregistered, "mail", ptr(registry.StatusDegraded), registry.StatusDeregistered, -4*time.Second))
	b.keys("4")
	b.order("mail", "weather")
	b.contains("[deregistered 2]")
	if b.m.byID[uuid.NewSHA1(uuid.NameSpaceOID, []byte("mail"))].DeregisteredAt == nil {
		t.Fatal("deregistered_at not set")
	}
}

func TestFeedRegistrationAddsARow(t *testing.T) {
	t.Parallel()
	src := newFake()
	b := newBoard(t, src).load()
	reg := event(registry.KindRegistered, "archive", nil, registry.StatusHealthy, 0)
	b.events(reg)
	// The row is there at once, made from the event, in module order.
	b.order("archive", "calendar", "calendar-sync", "mail", "search", "weather")
	b.contains("6 servers", "  archive            9.9.9       healthy       0s ago          0s ago      2025-06-18")
	if b.cmd == nil {
		t.Fatal("no command after an unknown server's registration")
	}

	// The fetch fills the row with the server object.
	full := server("archive", "1.0.0", registry.StatusHealthy, 0)
	src.servers = append(src.servers, full)
	b.send(b.m.fetchServer(full.ServerID, 1)())
	b.contains("  archive            1.0.0       healthy", "2025-06-18, 2025-03-26")

	// A fetch overtaken by the feed does not roll the status back.
	late := event(registry.KindRegistered, "zeta", nil, registry.StatusHealthy, 0)
	b.events(late)
	b.events(event(registry.KindDeregistered, "zeta", ptr(registry.StatusHealthy), registry.StatusDeregistered, 0))
	b.send(serverMsg{srv: server("zeta", "2.0.0", registry.StatusHealthy, 0), touch: 1})
	b.contains("  zeta               2.0.0       deregistered")
	// A fetch that a list overtook is ignored.
	src.servers = append(src.servers, server("zeta", "2.0.0", registry.StatusDeregistered, 0))
	b.send(b.m.list()())
	b.contains("  zeta               2.0.0       deregistered")
	b.send(serverMsg{srv: server("zeta", "3.0.0", registry.StatusHealthy, 0), touch: 1})
	b.lacks("3.0.0")
	// A failed fetch keeps the row made from the event.
	other := event(registry.KindRegistered, "omega", nil, registry.StatusHealthy, 0)
	b.events(other)
	b.send(b.m.fetchServer(other.ServerID, 1)())
	b.contains("  omega              9.9.9       healthy")
}

func TestFeedReconnectingIsShown(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	b.feed(feedMsg{stateSeen: true})
	b.lacks("Feed lost")
	b.feed(feedMsg{stateSeen: true, state: fmt.Errorf("watch: %w", &url.Error{Op: "Get", URL: "http://127.0.0.1:8420/v1/mcp/watch",
		Err: errors.New("dial tcp 127.0.0.1:8420: connect: connection refused")})})
	b.contains("listed 10:00:30 · reconnecting…",
		" Feed lost: dial tcp 127.0.0.1:8420: connect: connection refused (reconnecting…) ",
		"> calendar") // the data stays
	if b.cmd == nil {
		t.Fatal("the board stopped waiting for the feed")
	}
	// Events that arrive with the reconnection are applied; the banner goes.
	b.feed(feedMsg{stateSeen: true, events: []registry.Event{
		event(registry.KindUnhealthy, "mail", ptr(registry.StatusDegraded), registry.StatusUnhealthy, 0),
	}})
	b.lacks("Feed lost", "reconnecting")
	b.contains("listed 10:00:30 · live", "  mail               2.0.0       unhealthy")
}

func TestFeedExpiredCursorListsAgain(t *testing.T) {
	t.Parallel()
	src := newFake()
	b := newBoard(t, src).load()
	first := b.m.feed
	b.feed(feedMsg{ended: true, err: fmt.Errorf("%w: Cursor expired: list again", ErrCursorExpired)})
	if b.m.feed != nil || !b.m.fetching || b.cmd == nil {
		t.Fatalf("after a 410: feed %v, fetching %v, cmd %v; want a new list", b.m.feed, b.m.fetching, b.cmd != nil)
	}
	b.lacks("API unreachable")
	// The list's answer (with a server changed meanwhile) starts a new watch.
	src.servers[1].Status = registry.StatusUnhealthy
	b.send(b.cmd())
	if b.m.feed == nil || b.m.feed == first || src.calls != 2 {
		t.Fatalf("after the list: feed %p (first %p), %d lists", b.m.feed, first, src.calls)
	}
	b.contains("> calendar           1.3.2       unhealthy")
	// A batch of the old watch is ignored.
	b.send(feedMsg{pipe: first, events: []registry.Event{
		event(registry.KindRecovered, "calendar", ptr(registry.StatusUnhealthy), registry.StatusHealthy, 0),
	}})
	b.contains("> calendar           1.3.2       unhealthy")
	if first.ctx.Err() == nil {
		t.Fatal("the old watch is still running")
	}
}

func TestFeedRefusedBacksOffAndListsAgain(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	b.feed(feedMsg{ended: true, err: errors.New("Unauthorized: the token expired")})
	b.contains("API unreachable: watch: Unauthorized: the token expired (retrying in 1s)", "> calendar")
	if b.m.feed != nil || b.cmd == nil {
		t.Fatal("no retry scheduled")
	}
	b.send(relistMsg{seq: b.m.seq})
	b.send(b.cmd())
	b.lacks("API unreachable")
	if b.m.feed == nil {
		t.Fatal("no watch after the list")
	}
}

func TestTransitionsPaneShowsTheNewest(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	var evs []registry.Event
	for i := range 3 * EventLimit {
		ev := event(registry.KindRegistered, fmt.Sprintf("mod-%04d", i), nil, registry.StatusHealthy, 0)
		evs = append(evs, ev)
	}
	// In batches of every size, the newest are shown, and no more kept.
	b.events(evs[:1]...)
	b.events(evs[1 : EventLimit+50]...)
	b.events(evs[EventLimit+50:]...)
	if n := len(b.m.events.events); n != EventLimit {
		t.Fatalf("pane keeps %d events, want %d", n, EventLimit)
	}
	v := b.view()
	pane := v[strings.Index(v, "── latest transitions"):]
	if !strings.Contains(pane, "mod-0599") || !strings.Contains(pane, "mod-0592") || strings.Contains(pane, "mod-0591") {
		t.Fatalf("pane does not show the 8 newest:\n%s", pane)
	}
	b.contains("605 servers")
}

func TestRunFollowsTheFeed(t *testing.T) {
	t.Parallel()
	src := newFake()
	src.watching = make(chan struct{})
	in, w := io.Pipe()
	defer w.Close()
	var out testlog.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, src, Options{In: in, Out: &out, NoColor: true}) }()
	select {
	case <-src.watching:
	case <-time.After(5 * time.Second):
		t.Fatal("Run never watched")
	}
	// The stream said it is up: the header shows it.
	testwait.Poll(t, "shown live", 5*time.Second, func() error {
		if s := out.String(); !strings.Contains(s, "live") {
			return fmt.Errorf("the screen: %q", s)
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end")
	}
}

func TestHealthyAgeIsBoundedByTwoIntervals(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	// No heartbeat reaches the board between lists: 30 s later a healthy
	// server's heartbeat is known to be under two intervals (20 s) old, the
	// others' ages are exact (a heartbeat would have recovered them).
	b.now = t0.Add(30 * time.Second)
	b.send(clockMsg{})
	b.contains(
		"> calendar           1.3.2       healthy       <20s ago",
		"  mail               2.0.0       degraded      1m02s ago",
		"  search             0.9.1       unhealthy     1m30s ago",
	)
}
