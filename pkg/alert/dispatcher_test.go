package alert_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cyberos/mcpd/pkg/alert"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

var epoch = time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)

// memFixture is an in-memory store with a server of its own tenant.
type memFixture struct {
	ctx    context.Context
	clock  *clockwork.FakeClock
	store  *memstore.Store
	tenant uuid.UUID
	srv    registry.Server
}

func newMemFixture(t *testing.T) *memFixture {
	t.Helper()
	f := &memFixture{ctx: t.Context(), clock: clockwork.NewFakeClockAt(epoch), tenant: uuid.New()}
	f.store = memstore.New(f.clock)
	var err error
	if f.srv, _, _, err = f.store.Register(f.ctx, f.tenant, serverInfo("calendar"), 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// unhealthy moves the clock 35 s on and sweeps: the server turns unhealthy.
func (f *memFixture) unhealthy(t *testing.T) registry.Event {
	t.Helper()
	f.clock.Advance(35 * time.Second)
	result, err := f.store.Sweep(f.ctx, store.SweepRequest{Now: time.Time{}, Interval: interval, Limit: 1000})
	evs := result.Events
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Kind != registry.KindUnhealthy {
		t.Fatalf("sweep: %+v, want one unhealthy event", evs)
	}
	return evs[0]
}

func (f *memFixture) heartbeat(t *testing.T) registry.Event {
	t.Helper()
	_, ev, err := f.store.Heartbeat(f.ctx, f.tenant, f.srv.ServerID)
	if err != nil {
		t.Fatal(err)
	}
	if ev == nil || ev.Kind != registry.KindRecovered {
		t.Fatalf("heartbeat: event %+v, want recovered", ev)
	}
	return *ev
}

// A webhook that fails three times still gets the event, signed, with the
// event's JSON and its tenant.
func TestWebhookRetriesAndSigns(t *testing.T) {
	f := newMemFixture(t)
	ev := f.unhealthy(t)
	hook := newReceiver(t, func(n int) int {
		if n <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	secret := []byte("s3cret-webhook-key")
	w, err := alert.NewWebhook(hook.srv.URL+"/hooks/mcpd", secret, httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	start(t, fast(alert.DispatcherOptions{Outbox: f.store, Destinations: []alert.Destination{w}, Registerer: reg}))

	reqs := hook.waitFor(t, "the webhook", atLeast(1))
	if n := hook.attempts(); n != 4 {
		t.Fatalf("%d attempts, want 4 (3 failed)", n)
	}
	r := reqs[0]
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	if id := r.header.Get(alert.HeaderEventID); id != ev.EventID.String() {
		t.Fatalf("event id header %q, want %s", id, ev.EventID)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(r.body)
	if got, want := r.header.Get(alert.HeaderSignature), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
	if !alert.Verify(secret, r.body, r.header.Get(alert.HeaderSignature)) {
		t.Fatal("Verify refuses the signature")
	}
	if alert.Verify([]byte("other"), r.body, r.header.Get(alert.HeaderSignature)) || alert.Verify(secret, r.body, "sha256=00") {
		t.Fatal("Verify accepts a wrong signature")
	}

	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"event_id": ev.EventID.String(), "kind": "mcp.server.unhealthy", "server_id": f.srv.ServerID.String(),
		"module_name": "calendar", "from_status": "healthy", "to_status": "unhealthy",
		"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "occurred_at": "2026-05-17T10:00:35Z",
		"tenant_id": f.tenant.String(),
		"body": map[string]any{
			"server_id": f.srv.ServerID.String(), "module_name": "calendar", "status": "unhealthy", "version": "1.3.2",
			"supported_protocols": []any{"2025-06-18"}, "skills_affected": []any{"create-event"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("payload:\n got %v\nwant %v", got, want)
	}
	waitMetric(t, reg, "mcpd_alerts_sent_total", w.Name(), 1)
	if v, _ := metric(t, reg, "mcpd_alerts_failed_total", w.Name()); v != 3 {
		t.Fatalf("failed_total %v, want 3", v)
	}
	waitMetric(t, reg, "mcpd_alerts_pending", w.Name(), 0) // acknowledged after the retries
}

// waitMetric waits until name{destination=dest} is want.
func waitMetric(t *testing.T, reg *prometheus.Registry, name, dest string, want float64) {
	t.Helper()
	waitMetricCond(t, reg, name, dest, want, func(v float64) bool { return v == want })
}

// waitMetricAtLeast waits until name{destination=dest} is at least want.
func waitMetricAtLeast(t *testing.T, reg *prometheus.Registry, name, dest string, want float64) {
	t.Helper()
	waitMetricCond(t, reg, name, dest, want, func(v float64) bool { return v >= want })
}

func waitMetricCond(t *testing.T, reg *prometheus.Registry, name, dest string, want float64, ok func(float64) bool) {
	t.Helper()
	testwait.Until(t, fmt.Sprintf("%s{destination=%q} = %v", name, dest, want), waitTimeout, func() bool {
		v, _ := metric(t, reg, name, dest)
		return ok(v)
	})
}

// Firing then resolved, exactly as Alertmanager's v2 API takes them.
func TestAlertmanagerFiringThenResolved(t *testing.T) {
	f := newMemFixture(t)
	am := newReceiver(t, nil)
	dest, err := alert.NewAlertmanager(am.srv.URL+"/", httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	// The fake clock drives the dispatcher too: rounds come from the first
	// one at start and from Transition, never from a poll.
	d, _ := start(t, alert.DispatcherOptions{
		Outbox: f.store, Destinations: []alert.Destination{dest}, Clock: f.clock, PollInterval: time.Hour,
	})
	f.unhealthy(t) // at 10:00:35
	d.Transition(f.ctx, registry.Event{Kind: registry.KindUnhealthy})

	reqs := am.waitFor(t, "the firing alert", atLeast(1))
	labels := map[string]any{
		"alertname": "MCPServerUnhealthy", "tenant_id": f.tenant.String(), "module_name": "calendar",
		"server_id": f.srv.ServerID.String(), "severity": "critical",
	}
	summary := fmt.Sprintf("MCP server calendar of tenant %s is unhealthy", f.tenant)
	firing := []map[string]any{{
		"labels": labels,
		"annotations": map[string]any{
			"summary": summary, "version": "1.3.2", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
			"last_heartbeat_at": "2026-05-17T10:00:00Z",
		},
		"startsAt": "2026-05-17T10:00:35Z",
		"endsAt":   "2026-05-17T10:03:35Z", // now + 3 x the 1 min resend interval
	}}
	if got := amAlerts(t, reqs[0]); !reflect.DeepEqual(got, firing) {
		t.Fatalf("firing:\n got %v\nwant %v", got, firing)
	}
	if ct := reqs[0].header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}

	f.clock.Advance(5 * time.Second)
	ev := f.heartbeat(t) // at 10:00:40
	d.Transition(f.ctx, ev)
	reqs = am.waitFor(t, "the resolved alert", atLeast(2))
	resolved := []map[string]any{{
		"labels": labels,
		"annotations": map[string]any{
			"summary": summary, "version": "1.3.2", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
			"last_heartbeat_at": "2026-05-17T10:00:40Z",
		},
		"endsAt": "2026-05-17T10:00:40Z",
	}}
	if got := amAlerts(t, reqs[1]); !reflect.DeepEqual(got, resolved) {
		t.Fatalf("resolved:\n got %v\nwant %v", got, resolved)
	}
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2: the resend at start skips what the round just fired", len(reqs))
	}
}

// A server that is unhealthy and registers again (a restarted module)
// resolves its alert: Alertmanager gets endsAt, the webhook the
// registration.
func TestReRegistrationResolves(t *testing.T) {
	f := newMemFixture(t)
	am := newReceiver(t, nil)
	hook := newReceiver(t, nil)
	amDest, err := alert.NewAlertmanager(am.srv.URL+"/", httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	hookDest, err := alert.NewWebhook(hook.srv.URL+"/hooks/mcpd", []byte("s3cret-webhook-key"), httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := start(t, alert.DispatcherOptions{
		Outbox: f.store, Destinations: []alert.Destination{amDest, hookDest}, Clock: f.clock, PollInterval: time.Hour,
	})
	f.unhealthy(t) // at 10:00:35
	d.Transition(f.ctx, registry.Event{Kind: registry.KindUnhealthy})
	am.waitFor(t, "the firing alert", atLeast(1))
	hook.waitFor(t, "the unhealthy event", atLeast(1))

	f.clock.Advance(5 * time.Second)
	_, _, ev, err := f.store.Register(f.ctx, f.tenant, serverInfo("calendar"), 0) // at 10:00:40
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != registry.KindRegistered || ev.FromStatus == nil || *ev.FromStatus != registry.StatusUnhealthy {
		t.Fatalf("registering again: %+v, want registered from unhealthy", ev)
	}
	d.Transition(f.ctx, ev)
	reqs := am.waitFor(t, "the resolved alert", atLeast(2))
	got := amAlerts(t, reqs[1])
	if len(got) != 1 || got[0]["endsAt"] != "2026-05-17T10:00:40Z" ||
		got[0]["annotations"].(map[string]any)["last_heartbeat_at"] != "2026-05-17T10:00:40Z" {
		t.Fatalf("resolved: %v, want endsAt and last_heartbeat_at 10:00:40", got)
	}
	hooks := hook.waitFor(t, "the registration", atLeast(2))
	var body map[string]any
	if err := json.Unmarshal(hooks[1].body, &body); err != nil {
		t.Fatal(err)
	}
	if body["kind"] != "mcp.server.registered" || body["from_status"] != "unhealthy" || body["to_status"] != "healthy" {
		t.Fatalf("webhook: %v, want the registration from unhealthy", body)
	}

	// Registering again while healthy raises nothing.
	f.clock.Advance(5 * time.Second)
	if _, _, ev, err = f.store.Register(f.ctx, f.tenant, serverInfo("calendar"), 0); err != nil {
		t.Fatal(err)
	}
	d.Transition(f.ctx, ev)
	f.unhealthy(t)
	d.Transition(f.ctx, registry.Event{Kind: registry.KindUnhealthy})
	hooks = hook.waitFor(t, "the next unhealthy event", atLeast(3))
	if err := json.Unmarshal(hooks[2].body, &body); err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 3 || body["kind"] != "mcp.server.unhealthy" {
		t.Fatalf("webhook got %d events, the third %v; want the healthy registration skipped", len(hooks), body["kind"])
	}
}

// Firing alerts are re-sent every resend interval while the server stays
// unhealthy, each time held for three more intervals, and no longer once
// it recovers; the webhook gets no re-sends. The fake clock moves the
// dispatcher from one round to the next.
func TestResendFiring(t *testing.T) {
	f := newMemFixture(t)
	f.unhealthy(t)
	am := newReceiver(t, nil)
	hook := newReceiver(t, nil)
	client := httpClient(t)
	dests, err := alert.NewDestinations([]string{am.srv.URL}, hook.srv.URL, "", client)
	if err != nil {
		t.Fatal(err)
	}
	const resend = time.Minute
	opts := alert.DispatcherOptions{Outbox: f.store, Destinations: dests, Clock: f.clock,
		PollInterval: resend, ResendInterval: resend}
	d, rounds := startOnClock(t, opts)
	both := []string{dests[0].Name(), dests[1].Name()}

	// The first round fires the alert; each resend interval sends it again.
	rounds.settle(both...)
	sentAt := []time.Time{f.clock.Now()}
	for range 2 {
		f.clock.Advance(resend)
		rounds.settle(both...)
		sentAt = append(sentAt, f.clock.Now())
	}
	reqs := am.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests to Alertmanager after two resend intervals, want 3", len(reqs))
	}
	for i, r := range reqs {
		got := amAlerts(t, r)
		if len(got) != 1 || got[0]["startsAt"] != "2026-05-17T10:00:35Z" {
			t.Fatalf("request %d: %v", i, got)
		}
		// Held for three resend intervals from when it was sent.
		if want := sentAt[i].Add(3 * resend).Format(time.RFC3339); got[0]["endsAt"] != want {
			t.Fatalf("request %d: endsAt %v, want %s", i, got[0]["endsAt"], want)
		}
	}

	ev := f.heartbeat(t)
	d.Transition(f.ctx, ev)
	rounds.settle(both...)
	reqs = am.requests()
	if a := amAlerts(t, reqs[len(reqs)-1]); len(reqs) != 4 || len(a) != 1 || a[0]["startsAt"] != nil {
		t.Fatalf("after the recovery: %d requests, the last %v; want a fourth that resolves", len(reqs), a)
	}
	// A few resend intervals: nothing more may come.
	for range 4 {
		f.clock.Advance(resend)
		rounds.settle(both...)
	}
	if n := len(am.requests()); n != 4 {
		t.Fatalf("Alertmanager got %d requests, want 4: re-sends went on after the resolution", n)
	}
	if n := len(hook.requests()); n != 2 {
		t.Fatalf("webhook got %d requests, want 2 (firing and resolved, no re-sends)", n)
	}
}

// One destination that hangs or refuses delays nothing for another; its
// backlog shows in the undelivered metrics.
func TestDestinationIsolation(t *testing.T) {
	f := newMemFixture(t)
	ev := f.unhealthy(t)
	hanging := newReceiver(t, func(int) int { return 0 })
	refusing := newReceiver(t, func(int) int { return http.StatusInternalServerError })
	working := newReceiver(t, nil)
	client := httpClient(t)
	var dests []alert.Destination
	for _, u := range []string{hanging.srv.URL + "/hang", refusing.srv.URL + "/refuse", working.srv.URL + "/ok"} {
		w, err := alert.NewWebhook(u, nil, client)
		if err != nil {
			t.Fatal(err)
		}
		dests = append(dests, w)
	}
	reg := prometheus.NewRegistry()
	// The fake clock: the refusing destination backs off for good.
	start(t, alert.DispatcherOptions{Outbox: f.store, Destinations: dests, Clock: f.clock, Registerer: reg})

	// The hanging request never ends: the event arriving at all shows it
	// did not wait for it.
	reqs := working.waitFor(t, "the working destination", atLeast(1))
	if id := reqs[0].header.Get(alert.HeaderEventID); id != ev.EventID.String() {
		t.Fatalf("event %s, want %s", id, ev.EventID)
	}
	waitMetric(t, reg, "mcpd_alerts_failed_total", dests[1].Name(), 1)
	testwait.Eventually(t, "the hanging destination tried", func() bool { return hanging.attempts() > 0 })
	// The request arriving is not yet its acknowledgement in the outbox.
	waitMetric(t, reg, "mcpd_alerts_pending", dests[2].Name(), 0)

	f.clock.Advance(90 * time.Second)
	if n := hanging.attempts(); n != 1 {
		t.Fatalf("hanging destination: %d attempts, want 1 in flight", n)
	}
	for _, c := range []struct {
		dest          alert.Destination
		pending, aged float64
	}{{dests[0], 1, 90}, {dests[1], 1, 90}, {dests[2], 0, 0}} {
		if v, ok := metric(t, reg, "mcpd_alerts_pending", c.dest.Name()); !ok || v != c.pending {
			t.Errorf("%s: pending %v (present %v), want %v", c.dest.Name(), v, ok, c.pending)
		}
		if v, _ := metric(t, reg, "mcpd_alerts_oldest_undelivered_seconds", c.dest.Name()); v != c.aged {
			t.Errorf("%s: oldest undelivered %v s, want %v", c.dest.Name(), v, c.aged)
		}
	}
	if v, _ := metric(t, reg, "mcpd_alerts_sent_total", dests[2].Name()); v != 1 {
		t.Errorf("sent_total of the working destination %v, want 1", v)
	}
}

// A refusal of the alert itself (400) is logged and skipped so the next
// event goes out; a refusal about the destination (404, 429) is retried.
func TestRefusals(t *testing.T) {
	f := newMemFixture(t)
	first := f.unhealthy(t)
	f.clock.Advance(time.Second)
	second := f.heartbeat(t)

	var seen []string
	hook := newReceiver(t, nil)
	hook.setAnswer(func(n int) int {
		switch n {
		case 1:
			return http.StatusBadRequest // the unhealthy event: skipped
		case 2:
			return http.StatusNotFound // the recovery: retried
		case 3:
			return http.StatusTooManyRequests // retried
		}
		return http.StatusOK
	})
	w, err := alert.NewWebhook(hook.srv.URL, nil, httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	start(t, fast(alert.DispatcherOptions{Outbox: f.store, Destinations: []alert.Destination{w}, Registerer: reg}))
	reqs := hook.waitFor(t, "the second event", atLeast(1))
	for _, r := range reqs {
		seen = append(seen, r.header.Get(alert.HeaderEventID))
	}
	if len(seen) != 1 || seen[0] != second.EventID.String() {
		t.Fatalf("delivered %v, want only %s (the refused %s skipped)", seen, second.EventID, first.EventID)
	}
	if n := hook.attempts(); n != 4 {
		t.Fatalf("%d attempts, want 4", n)
	}
	if v, _ := metric(t, reg, "mcpd_alerts_failed_total", w.Name()); v != 3 {
		t.Fatalf("failed_total %v, want 3", v)
	}
	waitMetric(t, reg, "mcpd_alerts_pending", w.Name(), 0)
}

func TestDeliveryErrorPermanent(t *testing.T) {
	for status, want := range map[int]bool{
		0: false, 301: false, 400: true, 409: true, 413: true, 415: true, 422: true,
		401: false, 403: false, 404: false, 408: false, 429: false, 500: false, 502: false, 503: false,
	} {
		if got := (&alert.DeliveryError{Status: status}).Permanent(); got != want {
			t.Errorf("status %d: permanent %v, want %v", status, got, want)
		}
	}
}

// An event whose incident is already over (the server registered again,
// which resolves nothing in the outbox) is not fired at Alertmanager; a
// recovery from degraded resolves nothing and goes nowhere.
func TestAlertmanagerSkipsOverIncidents(t *testing.T) {
	f := newMemFixture(t)
	f.unhealthy(t)
	if _, _, _, err := f.store.Register(f.ctx, f.tenant, serverInfo("calendar"), 0); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(25 * time.Second)
	if _, err := f.store.Sweep(f.ctx, store.SweepRequest{Now: time.Time{}, Interval: interval, Limit: 1000}); err != nil { // degraded
		t.Fatal(err)
	}
	f.heartbeat(t) // recovered from degraded
	if _, _, _, err := f.store.Register(f.ctx, f.tenant, serverInfo("mail"), 0); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(35 * time.Second)
	if _, err := f.store.Sweep(f.ctx, store.SweepRequest{Now: time.Time{}, Interval: interval, Limit: 1000}); err != nil { // mail (and calendar) unhealthy
		t.Fatal(err)
	}

	am := newReceiver(t, nil)
	hook := newReceiver(t, nil)
	dests, err := alert.NewDestinations([]string{am.srv.URL}, hook.srv.URL, "", httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	start(t, fast(alert.DispatcherOptions{Outbox: f.store, Destinations: dests, Registerer: reg}))
	waitMetric(t, reg, "mcpd_alerts_pending", dests[0].Name(), 0)
	waitMetric(t, reg, "mcpd_alerts_pending", dests[1].Name(), 0)

	var fired, resolved []string
	for _, r := range am.requests() {
		for _, a := range amAlerts(t, r) {
			module := a["labels"].(map[string]any)["module_name"].(string)
			if startsAt, ok := a["startsAt"].(string); ok {
				fired = append(fired, module+"@"+startsAt)
			} else {
				resolved = append(resolved, module+"@"+a["endsAt"].(string))
			}
		}
	}
	mailSince := f.clock.Now().Format(time.RFC3339)
	want := []string{"calendar@" + mailSince, "mail@" + mailSince}
	if !reflect.DeepEqual(fired, want) {
		t.Fatalf("alertmanager got %v firing, want %v (not the first calendar incident)", fired, want)
	}
	// The first incident ended with calendar's registration again: its
	// resolution is sent, which Alertmanager takes for an alert it never
	// saw firing as nothing to do.
	if want := []string{"calendar@" + epoch.Add(35*time.Second).Format(time.RFC3339)}; !reflect.DeepEqual(resolved, want) {
		t.Fatalf("alertmanager got %v resolved, want %v", resolved, want)
	}
	// The webhook gets every alert event: two firings of calendar, the
	// registration that ended the first, one firing of mail.
	ids := eventIDs(hook.requests())
	if len(ids) != 4 {
		t.Fatalf("webhook got %d events, want 4: %v", len(ids), ids)
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }

func TestNewDestinations(t *testing.T) {
	dir := t.TempDir()
	secretFile := dir + "/secret"
	if err := writeFile(secretFile, "k3y\n"); err != nil {
		t.Fatal(err)
	}
	dests, err := alert.NewDestinations(
		[]string{"http://am-1:9093", "https://user:pw@am-2:9093/prefix/"},
		"https://hooks.example/mcpd?token=abc", secretFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dests {
		names = append(names, d.Name())
	}
	want := []string{"alertmanager:http://am-1:9093", "alertmanager:https://user@am-2:9093/prefix", "webhook:https://hooks.example/mcpd"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	for _, c := range []struct {
		am            []string
		hook, secret  string
		wantErrSubstr string
	}{
		{[]string{"ftp://am"}, "", "", "want an http or https URL"},
		{[]string{"http://"}, "", "", "no host"},
		{[]string{"http://am", "http://am/"}, "", "", "given twice"},
		{nil, "", secretFile, "without a webhook url"},
		{nil, "http://hook", dir + "/missing", "read secret file"},
	} {
		if _, err := alert.NewDestinations(c.am, c.hook, c.secret, nil); err == nil || !strings.Contains(err.Error(), c.wantErrSubstr) {
			t.Errorf("%v %q %q: error %v, want one with %q", c.am, c.hook, c.secret, err, c.wantErrSubstr)
		}
	}
	if _, err := alert.NewDispatcher(alert.DispatcherOptions{}); err == nil {
		t.Error("dispatcher without an outbox: no error")
	}
	store := memstore.New(nil)
	if _, err := alert.NewDispatcher(alert.DispatcherOptions{Outbox: store, Destinations: []alert.Destination{dests[0], dests[0]}}); err == nil {
		t.Error("dispatcher with a destination twice: no error")
	}
	reg := prometheus.NewRegistry()
	if _, err := alert.NewDispatcher(alert.DispatcherOptions{Outbox: store, Destinations: dests, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := alert.NewDispatcher(alert.DispatcherOptions{Outbox: store, Destinations: dests, Registerer: reg}); err == nil {
		t.Error("metrics registered twice: no error")
	}
}

// Run refuses a second concurrent call, and with no destination waits for
// its context.
func TestRunTwice(t *testing.T) {
	d, err := alert.NewDispatcher(alert.DispatcherOptions{Outbox: memstore.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	// Not probed with Run itself: a probe that took the slot for an
	// instant could refuse the first Run instead.
	testwait.Until(t, "the first Run running", waitTimeout, d.Running)
	probe, stopProbe := context.WithCancel(t.Context())
	stopProbe()
	if err := d.Run(probe); err == nil {
		t.Fatal("a second Run beside the first: nil, want refused")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Each member of an Alertmanager HA pair gets every alert through its own
// cursor: one that refuses for a while delays nothing for the other.
func TestAlertmanagerPair(t *testing.T) {
	f := newMemFixture(t)
	f.unhealthy(t)
	am1 := newReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusBadGateway
		}
		return http.StatusOK
	})
	am2 := newReceiver(t, nil)
	dests, err := alert.NewDestinations([]string{am1.srv.URL, am2.srv.URL}, "", "", httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	if dests[0].Name() == dests[1].Name() {
		t.Fatalf("both members named %s", dests[0].Name())
	}
	start(t, fast(alert.DispatcherOptions{Outbox: f.store, Destinations: dests}))
	for _, am := range []*receiver{am2, am1} {
		got := amAlerts(t, am.waitFor(t, "the firing alert", atLeast(1))[0])
		if len(got) != 1 || got[0]["labels"].(map[string]any)["server_id"] != f.srv.ServerID.String() {
			t.Fatalf("got %v", got)
		}
	}
	if n := am1.attempts(); n < 3 {
		t.Fatalf("first member: %d attempts, want 3", n)
	}
}

// A mass heartbeat loss raises MCPRegistryMassHeartbeatLoss at
// Alertmanager (held for three resend intervals, never re-sent), and
// nothing at the webhook.
func TestMassLoss(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	am := newReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable // kept and retried
		}
		return http.StatusOK
	})
	hook := newReceiver(t, nil)
	dests, err := alert.NewDestinations([]string{am.srv.URL}, hook.srv.URL, "", httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	opts := fast(alert.DispatcherOptions{Outbox: memstore.New(clock), Destinations: dests, Clock: clock})
	d, rounds := startOnClock(t, opts)
	rounds.settle(dests[0].Name(), dests[1].Name())
	tenant := uuid.New()
	d.MassLoss(lifecycle.MassLoss{TenantID: tenant, Unhealthy: 12, Live: 20})
	// The failed attempt backs off on the fake clock: move it on to the retry.
	rounds.settle(dests[0].Name())
	if n := am.attempts(); n != 1 || len(am.requests()) != 0 {
		t.Fatalf("%d attempts, %d accepted; want the first refused", n, len(am.requests()))
	}
	clock.Advance(opts.BackoffMax)
	rounds.settle(dests[0].Name(), dests[1].Name())
	if len(am.requests()) != 1 {
		t.Fatalf("no mass-loss alert after %d attempts", am.attempts())
	}
	got := amAlerts(t, am.requests()[0])
	want := []map[string]any{{
		"labels": map[string]any{"alertname": "MCPRegistryMassHeartbeatLoss", "tenant_id": tenant.String(), "severity": "critical"},
		"annotations": map[string]any{
			"summary":   fmt.Sprintf("12 of 20 live MCP servers of tenant %s went unhealthy in one sweep", tenant),
			"unhealthy": "12", "live": "20",
		},
		"startsAt": "2026-05-17T10:00:00Z",
		"endsAt":   "2026-05-17T10:03:00Z",
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mass loss:\n got %v\nwant %v", got, want)
	}
	if n := len(hook.requests()); n != 0 {
		t.Fatalf("webhook got %d requests", n)
	}
}
