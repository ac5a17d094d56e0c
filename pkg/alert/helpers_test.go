package alert_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cyberos/mcpd/pkg/alert"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// waitTimeout bounds every wait for something to arrive.
const waitTimeout = testwait.Cap

const interval = 10 * time.Second

// recorded is one request a test server received.
type recorded struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is an httptest server that records requests and answers each
// with the status its answer function gives for the request's number
// (1-based); 0 blocks until the request is cancelled.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []recorded
	calls  int
	answer func(n int) int
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	t.Helper()
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.calls++
		status := http.StatusOK
		if r.answer != nil {
			status = r.answer(r.calls)
		}
		if status == http.StatusOK {
			r.reqs = append(r.reqs, recorded{header: req.Header.Clone(), body: body, at: time.Now()})
		}
		r.mu.Unlock()
		if status == 0 {
			<-req.Context().Done()
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setAnswer(f func(n int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = f
}

func (r *receiver) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

func (r *receiver) attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// waitFor polls until cond holds of the accepted requests, or fails.
func (r *receiver) waitFor(t *testing.T, what string, cond func([]recorded) bool) []recorded {
	t.Helper()
	var reqs []recorded
	testwait.Until(t, what, waitTimeout, func() bool {
		reqs = r.requests()
		return cond(reqs)
	})
	return reqs
}

func atLeast(n int) func([]recorded) bool {
	return func(reqs []recorded) bool { return len(reqs) >= n }
}

// amAlerts decodes a request to Alertmanager's v2 API.
func amAlerts(t *testing.T, r recorded) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("alertmanager body %s: %v", r.body, err)
	}
	return out
}

// httpClient is a client whose idle connections close with the test.
func httpClient(t *testing.T) *http.Client {
	c := alert.NewHTTPClient()
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// start runs a dispatcher until the test ends, or until the returned stop
// is called; stop waits for Run to return.
func start(t *testing.T, opts alert.DispatcherOptions) (*alert.Dispatcher, func()) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d, err := alert.NewDispatcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run: %v", err)
				}
			case <-time.After(waitTimeout):
				t.Errorf("dispatcher did not stop within %v", waitTimeout)
			}
		})
	}
	t.Cleanup(stop)
	return d, stop
}

// startReplica runs, until the test ends, a dispatcher of outbox to
// webhooks at hooks that claims several batches in turn: one of several
// mcpd replicas.
func startReplica(t *testing.T, outbox store.AlertOutbox, hooks ...*receiver) {
	t.Helper()
	client := httpClient(t)
	var dests []alert.Destination
	for _, h := range hooks {
		w, err := alert.NewWebhook(h.srv.URL, nil, client)
		if err != nil {
			t.Fatal(err)
		}
		dests = append(dests, w)
	}
	opts := fast(alert.DispatcherOptions{Outbox: outbox, Destinations: dests})
	opts.Batch = 7 // several batches, claimed in turn
	// A send that a loaded machine made slower than a second would make
	// the next round deliver without the claim, and another replica
	// deliver the same events too (at least once, by design): the tests
	// of replicas are of the claim.
	opts = alert.WithSlowSend(opts, time.Minute)
	start(t, opts)
}

// startOnClock runs a dispatcher on a fake clock (opts.Clock) until the
// test ends; its rounds tell when the destinations wait on the clock.
func startOnClock(t *testing.T, opts alert.DispatcherOptions) (*alert.Dispatcher, rounds) {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := alert.NewDispatcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rounds{t: t, ch: d.Waiting()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return d, r
}

// rounds are the dispatcher's signals: a destination finished a round and
// waits on the clock.
type rounds struct {
	t  *testing.T
	ch <-chan string
}

// settle waits until each named destination has finished one round more.
func (r rounds) settle(names ...string) {
	r.t.Helper()
	want := make(map[string]int)
	for _, n := range names {
		want[n]++
	}
	deadline := time.After(waitTimeout)
	for len(want) > 0 {
		select {
		case n := <-r.ch:
			if want[n]--; want[n] <= 0 {
				delete(want, n)
			}
		case <-deadline:
			r.t.Fatalf("destinations %v did not finish a round within %v", want, waitTimeout)
		}
	}
}

// testWriter sends log lines to t.Log while the test runs.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// fast are dispatcher timings for tests on the real clock.
func fast(opts alert.DispatcherOptions) alert.DispatcherOptions {
	opts.PollInterval = 20 * time.Millisecond
	opts.BackoffMin = 5 * time.Millisecond
	opts.BackoffMax = 20 * time.Millisecond
	return opts
}

func serverInfo(module string) registry.ServerInfo {
	return registry.ServerInfo{
		ModuleName: module, Version: "1.3.2", SupportedProtocols: []string{"2025-06-18"},
		CapabilityAdvertisement: []byte(`{"tools":{"listChanged":true}}`),
		Skills:                  []registry.SkillInfo{{Name: "create-event"}},
		TraceID:                 "4bf92f3577b34da6a3ce929d0e0e4736",
	}
}

// metric returns the value of name{destination=dest} in reg, and whether
// it is there.
func metric(t *testing.T, reg *prometheus.Registry, name, dest string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelValue(m, "destination") != dest {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			}
		}
	}
	return 0, false
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// eventIDs are the X-MCPD-Event-ID values of webhook requests, counted.
func eventIDs(reqs []recorded) map[string]int {
	out := make(map[string]int)
	for _, r := range reqs {
		out[r.header.Get(alert.HeaderEventID)]++
	}
	return out
}

// assertDeliveredOnce waits until every destination's receiver has had
// every event of evs, then checks for five poll intervals, in which a
// duplicate would show, that each had each event exactly once.
func assertDeliveredOnce(t *testing.T, evs []registry.Event, hooks map[string]*receiver) {
	t.Helper()
	for _, h := range hooks {
		h.waitFor(t, "every event", atLeast(len(evs)))
	}
	testwait.Throughout(t, 100*time.Millisecond, func() {
		for name, h := range hooks {
			ids := eventIDs(h.requests())
			if len(ids) != len(evs) {
				t.Fatalf("destination %s: %d distinct events, want %d", name, len(ids), len(evs))
			}
			for _, ev := range evs {
				if n := ids[ev.EventID.String()]; n != 1 {
					t.Fatalf("destination %s: event %s (%s) delivered %d times", name, ev.EventID, ev.Kind, n)
				}
			}
		}
	})
}
