package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// trailStub serves an audit trail in pages of at most pageCap events, with
// the index after a page as its cursor and none after the last page.
type trailStub struct {
	mu       sync.Mutex
	events   []heartbeat.Event
	pageCap  int
	requests int
	served   int // events sent, all requests together
}

func (s *trailStub) add(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.events = append(s.events, heartbeat.Event{EventID: uuid.New(), Kind: heartbeat.KindRegistered, ModuleName: "m" + strconv.Itoa(len(s.events))})
	}
}

func (s *trailStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		start, _ = strconv.Atoi(c)
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 || limit > s.pageCap {
		limit = s.pageCap
	}
	end := min(start+limit, len(s.events))
	list := api.EventList{Events: append([]heartbeat.Event{}, s.events[start:end]...)}
	if end < len(s.events) {
		next := strconv.Itoa(end)
		list.NextCursor = &next
	}
	s.served += end - start
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

func TestSourceEventsIncremental(t *testing.T) {
	t.Parallel()
	stub := &trailStub{pageCap: 3}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	c := client.New(srv.URL, "t")
	defer c.CloseIdleConnections()
	src := NewSource(c)
	ctx := context.Background()

	check := func(limit int) {
		t.Helper()
		got, err := src.Events(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		stub.mu.Lock()
		all := stub.events
		want := all[max(0, len(all)-limit):]
		stub.mu.Unlock()
		if len(got) != len(want) {
			t.Fatalf("Events(%d) gave %d events, want %d", limit, len(got), len(want))
		}
		for i := range want {
			if got[i].EventID != want[i].EventID {
				t.Fatalf("Events(%d)[%d] = %s, want %s (the latest, oldest first)", limit, i, got[i].ModuleName, want[i].ModuleName)
			}
		}
	}

	check(5) // empty trail
	stub.add(2)
	check(5)
	stub.add(8) // crosses page boundaries
	check(5)
	check(5) // nothing new
	stub.add(1)
	check(5)
	stub.add(7)
	check(5)

	// A refresh with nothing new re-reads only the last page, not the trail.
	stub.mu.Lock()
	stub.requests, stub.served = 0, 0
	stub.mu.Unlock()
	check(5)
	stub.mu.Lock()
	if stub.requests != 1 || stub.served > stub.pageCap {
		t.Fatalf("an idle refresh made %d requests for %d events", stub.requests, stub.served)
	}
	stub.mu.Unlock()

	// Asking for more than kept reads the trail again.
	check(12)
	check(100)
	if got, _ := src.Events(ctx, 0); got != nil {
		t.Fatalf("Events(0) = %v", got)
	}
}

func TestSourceAgainstAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := NewSource(b.client)
	ctx := context.Background()
	cal := b.register(t, "calendar")
	b.register(t, "mail")
	if _, err := b.client.Deregister(ctx, cal.ServerID); err != nil {
		t.Fatal(err)
	}
	servers, err := src.Servers(ctx)
	if err != nil || len(servers) != 2 || servers[0].ModuleName != "calendar" {
		t.Fatalf("Servers = %v, %v", servers, err)
	}
	events, err := src.Events(ctx, 2)
	if err != nil || len(events) != 2 || events[0].Kind != heartbeat.KindRegistered || events[1].Kind != heartbeat.KindDeregistered {
		t.Fatalf("Events(2) = %+v, %v", events, err)
	}
	b.register(t, "calendar")
	events, err = src.Events(ctx, 2)
	if err != nil || len(events) != 2 || events[1].Kind != heartbeat.KindRegistered || events[1].ServerID != cal.ServerID {
		t.Fatalf("Events(2) after re-register = %+v, %v", events, err)
	}
}
