package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
	"github.com/cyberos/mcpd/pkg/tui"
)

func TestSourceAgainstAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := NewSource(b.client)
	ctx := context.Background()
	cal := b.register(t, "calendar")
	b.register(t, "mail")
	snap, err := src.List(ctx)
	if err != nil || len(snap.Servers) != 2 || snap.Servers[0].ModuleName != "calendar" || snap.Cursor == "" {
		t.Fatalf("List = %+v, %v", snap, err)
	}
	srv, err := src.Server(ctx, cal.ServerID)
	if err != nil || srv.ModuleName != "calendar" {
		t.Fatalf("Server = %+v, %v", srv, err)
	}
	if _, err := src.Server(ctx, uuid.New()); err == nil {
		t.Fatal("Server of an unknown id: no error")
	}

	// Watching from the list's cursor gets what came after the list.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan registry.Event, 10)
	states := make(chan error, 10)
	done := make(chan error, 1)
	go func() {
		done <- src.Watch(wctx, snap.Cursor, func(ev registry.Event) error { got <- ev; return nil },
			func(err error) { states <- err })
	}()
	if _, err := b.client.Deregister(ctx, cal.ServerID); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-got:
		if ev.Kind != registry.KindDeregistered || ev.ServerID != cal.ServerID {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event from the watch")
	}
	if err := <-states; err != nil {
		t.Fatalf("first state %v, want nil (up)", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch after cancel: %v", err)
	}

	// An expired cursor is tui.ErrCursorExpired.
	err = NewSource(b.twin(t).client).Watch(ctx, snap.Cursor, func(registry.Event) error { return nil }, nil)
	if !errors.Is(err, tui.ErrCursorExpired) {
		t.Fatalf("Watch of an expired cursor: %v, want ErrCursorExpired", err)
	}
}

func TestWatchBoardFollowsTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "calendar")
	in, w := io.Pipe()
	defer w.Close()
	out := &testlog.Buffer{}
	opts := &watchOptions{IO: &IOStreams{In: in, Out: out, ErrOut: io.Discard}, Client: b.clientFunc(),
		Now: b.clock.Now, NoColor: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- watchRun(ctx, opts) }()
	waitOut := func(want string) {
		t.Helper()
		testwait.Until(t, "the board showing "+want, 10*time.Second, func() bool {
			return strings.Contains(out.String(), want)
		})
	}
	waitOut("live")
	// A registration after the list reaches the board through the feed.
	mail := b.register(t, "mail")
	waitOut("mail")
	waitOut("2 servers")
	if _, err := b.client.Deregister(context.Background(), mail.ServerID); err != nil {
		t.Fatal(err)
	}
	waitOut("deregistered 1")
	cancel() // SIGINT
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end with its context")
	}
}
