package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

// TestAvailabilityRun: servers availability, by SERVER_ID or MODULE,
// prints the API's figures, piped, on a terminal and as JSON; -o wide
// lists the same ratio.
func TestAvailabilityRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cal := b.register(t, "calendar", registry.SkillInfo{Name: "planning"})
	b.clock.Advance(10 * time.Minute)
	if _, err := b.client.Deregister(context.Background(), cal.ServerID); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(5 * time.Minute)
	b.register(t, "calendar", registry.SkillInfo{Name: "planning"})
	b.clock.Advance(15 * time.Minute) // tokens live an hour on the fake clock
	ctx := context.Background()
	api, err := b.client.ServerAvailability(ctx, cal.ServerID, registry.Window1h)
	if err != nil {
		t.Fatal(err)
	}
	if *api.AvailableRatio != 0.83333 {
		t.Fatalf("API ratio %v, want 0.83333", *api.AvailableRatio)
	}

	run := func(f output.Format, tty bool, o availabilityOptions) string {
		t.Helper()
		ts := newTestIO()
		ts.outTTY = tty
		o.IO, o.Client, o.Printer = ts.io, b.clientFunc(), b.printer(ts, f)
		if err := availabilityRun(ctx, &o); err != nil {
			t.Fatal(err)
		}
		return ts.out.String()
	}
	piped := run(output.Table, false, availabilityOptions{Module: "calendar", Window: registry.Window1h})
	want := "window\t1h\nfrom\t2026-05-17T09:30:00Z\nto\t2026-05-17T10:30:00Z\navailable_ratio\t0.83333\n" +
		"observed_seconds\t1800\nseconds.healthy\t1500\nseconds.degraded\t0\nseconds.unhealthy\t0\nseconds.deregistered\t300\n" +
		"transitions\t3\noutages\t1\n" +
		"2026-05-17T10:10:00Z\t2026-05-17T10:15:00Z\t300\tderegistered\n"
	if piped != want {
		t.Fatalf("piped:\n%q\nwant\n%q", piped, want)
	}
	if byID := run(output.Table, false, availabilityOptions{ServerID: cal.ServerID, Window: registry.Window1h}); byID != piped {
		t.Fatalf("by SERVER_ID:\n%s\nwant as by MODULE:\n%s", byID, piped)
	}
	term := run(output.Table, true, availabilityOptions{Module: "calendar", Window: registry.Window1h})
	for _, s := range []string{"Available:", output.Percent(api.AvailableRatio), "83.333%", "5m0s", "OUTAGE FROM", "deregistered"} {
		if !strings.Contains(term, s) {
			t.Errorf("terminal output lacks %q:\n%s", s, term)
		}
	}
	var got registry.Availability
	if err := json.Unmarshal([]byte(run(output.JSON, false, availabilityOptions{Module: "calendar", Window: registry.Window1h})), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, api) {
		t.Fatalf("json %+v, want the API's %+v", got, api)
	}

	// -o wide: the 24 h ratio, the same figure as the endpoint's.
	day, err := b.client.ServerAvailability(ctx, cal.ServerID, registry.Window24h)
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestIO()
	if err := listRun(ctx, &listOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.Wide)}); err != nil {
		t.Fatal(err)
	}
	if cells := strings.Split(ts.out.String(), "\t"); len(cells) < 5 || cells[4] != "0.83333" || *day.AvailableRatio != 0.83333 {
		t.Fatalf("wide list %q, want the 24 h ratio %v in the fifth column", ts.out, *day.AvailableRatio)
	}

	// The watch board's list carries the same ratio.
	snap, err := NewSource(b.client).List(ctx)
	if err != nil || snap.Availability[cal.ServerID] == nil || *snap.Availability[cal.ServerID] != *day.AvailableRatio {
		t.Fatalf("watch source: %+v, %v; want the 24 h ratio %v", snap.Availability, err, *day.AvailableRatio)
	}

	// skills availability: the skill of calendar alone has its figures.
	ts = newTestIO()
	if err := skillAvailabilityRun(ctx, &skillAvailabilityOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON),
		Name: "planning", Window: registry.Window1h}); err != nil {
		t.Fatal(err)
	}
	var sk registry.Availability
	if err := json.Unmarshal(ts.out.Bytes(), &sk); err != nil || *sk.AvailableRatio != *api.AvailableRatio || sk.Seconds.Deregistered != 300 {
		t.Fatalf("skills availability: %s (%v), want calendar's figures", ts.out, err)
	}

	ts = newTestIO()
	err = availabilityRun(ctx, &availabilityOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.Table), ServerID: uuid.New(), Window: registry.Window1h})
	if err == nil {
		t.Fatal("an unknown server: no error")
	}
	err = availabilityRun(ctx, &availabilityOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.Table), Module: "nope", Window: registry.Window1h})
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("an unknown module: %v", err)
	}
}

// TestListWideWithoutAvailability: an mcpd without GET /v1/mcp/availability
// still gets its list, with an empty column and a note on stderr.
func TestListWideWithoutAvailability(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cal := b.register(t, "calendar")
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/mcp/availability" {
			http.NotFound(w, r)
			return
		}
		b.srv.Config.Handler.ServeHTTP(w, r)
	}))
	defer old.Close()
	c := client.New(old.URL, b.token)
	defer c.CloseIdleConnections()
	ts := newTestIO()
	err := listRun(context.Background(), &listOptions{IO: ts.io, Client: func() (*client.Client, error) { return c, nil },
		Printer: b.printer(ts, output.Wide)})
	if err != nil {
		t.Fatal(err)
	}
	if want := cal.ServerID.String() + "\tcalendar\t1.3.2\thealthy\t\t2025-06-18\t"; !strings.HasPrefix(ts.out.String(), want) {
		t.Fatalf("wide list %q, want it to start %q", ts.out, want)
	}
	if !strings.Contains(ts.errOut.String(), "note: no availability column") {
		t.Fatalf("stderr %q, want the note", ts.errOut)
	}
}
