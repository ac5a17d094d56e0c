package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// watchServer is a real HTTP server with the change feed over a memstore.
type watchServer struct {
	url     string
	store   *memstore.Store
	metrics *api.Metrics
	secret  []byte
	tenant  uuid.UUID
	token   string
}

func startWatchServer(t *testing.T, key []byte, writeTimeout time.Duration) *watchServer {
	t.Helper()
	return startWatchServerReading(t, key, writeTimeout, 0)
}

// startWatchServerReading is startWatchServer with the server's
// ReadTimeout (0: none).
func startWatchServerReading(t *testing.T, key []byte, writeTimeout, readTimeout time.Duration) *watchServer {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC))
	store := memstore.New(clock)
	secret := []byte(strings.Repeat("k", 32))
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	metrics := api.NewMetrics(api.MetricsOptions{})
	hub := feed.NewHub(feed.Options{Source: store})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Run(ctx)
	}()
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store})
	srv := httptest.NewUnstartedServer(api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier, Metrics: metrics,
		Feed: hub, CursorKey: func(context.Context) ([]byte, error) { return key, nil }, Streams: ctx,
		StreamWriteTimeout: writeTimeout}))
	srv.Config.ReadTimeout = readTimeout
	srv.Start()
	t.Cleanup(func() {
		cancel()
		srv.CloseClientConnections()
		srv.Close()
		<-done
	})
	w := &watchServer{url: srv.URL, store: store, metrics: metrics, secret: secret, tenant: uuid.New()}
	tok, err := auth.Issue(secret, w.tenant, "test", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	w.token = tok
	return w
}

func (w *watchServer) get(t *testing.T, path string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, w.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (w *watchServer) register(t *testing.T, module string, skills int, nameLen int) {
	t.Helper()
	info := registry.ServerInfo{ModuleName: module, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}
	for i := range skills {
		name := fmt.Sprintf("%04d-", i) + strings.Repeat("x", max(nameLen-5, 0))
		info.Skills = append(info.Skills, registry.SkillInfo{Name: name})
	}
	if _, _, _, err := w.store.Register(context.Background(), w.tenant, info, 0); err != nil {
		t.Fatal(err)
	}
}

func problemOf(t *testing.T, resp *http.Response) api.Problem {
	t.Helper()
	defer resp.Body.Close()
	var p api.Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatalf("problem body: %v", err)
	}
	return p
}

// The stream's headers, its first event, and the answers before a stream:
// 400 for a cursor that is no position of the tenant's trail or a bad
// filter, 401 without a token.
func TestWatchStream(t *testing.T) {
	w := startWatchServer(t, nil, 0)
	resp := w.get(t, "/v1/mcp/watch?module_name=alpha", nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("Cache-Control") != "no-cache" || resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("watch: %d %v", resp.StatusCode, resp.Header)
	}
	w.register(t, "bravo", 0, 0)
	w.register(t, "alpha", 1, 6)
	r := bufio.NewReader(resp.Body)
	var lines []string
	for len(lines) < 4 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read the stream: %v", err)
		}
		lines = append(lines, strings.TrimRight(line, "\n"))
	}
	if !strings.HasPrefix(lines[0], "id: ") || lines[1] != "event: mcp.server.registered" ||
		!strings.HasPrefix(lines[2], `data: {"event_id":`) || lines[3] != "" {
		t.Fatalf("first message:\n%s", strings.Join(lines, "\n"))
	}
	var ev registry.Event
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[2], "data: ")), &ev); err != nil || ev.ModuleName != "alpha" {
		t.Fatalf("event %+v %v", ev, err)
	}
	// The id is a cursor of the audit list: after it, nothing.
	id := strings.TrimPrefix(lines[0], "id: ")
	list := w.get(t, "/v1/mcp/audit?cursor="+id, nil)
	var page api.EventList
	if err := json.NewDecoder(list.Body).Decode(&page); err != nil || len(page.Events) != 0 || page.WatchCursor == "" {
		t.Fatalf("audit after the event's id: %+v %v", page, err)
	}
	list.Body.Close()

	for _, c := range []struct {
		path   string
		header map[string]string
		field  string
	}{
		{"/v1/mcp/watch?cursor=garbage", nil, "cursor"},
		{"/v1/mcp/watch", map[string]string{"Last-Event-ID": "garbage"}, "Last-Event-ID"},
		{"/v1/mcp/watch?kind=mcp.server.nope", nil, "kind"},
		{"/v1/mcp/watch?server_id=nope", nil, "server_id"},
		{"/v1/mcp/watch?module_name=Bad", nil, "module_name"},
	} {
		resp := w.get(t, c.path, c.header)
		if p := problemOf(t, resp); resp.StatusCode != http.StatusBadRequest || p.Field != c.field {
			t.Fatalf("%s %v: %d %+v, want 400 naming %s", c.path, c.header, resp.StatusCode, p, c.field)
		}
	}
	// Another tenant's cursor is no position of this tenant's trail.
	other, _ := auth.Issue(w.secret, uuid.New(), "test", "mcp:read", time.Hour, time.Now())
	req, _ := http.NewRequest(http.MethodGet, w.url+"/v1/mcp/watch", nil)
	req.Header.Set("Authorization", "Bearer "+other)
	req.Header.Set("Last-Event-ID", id)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if p := problemOf(t, resp2); resp2.StatusCode != http.StatusBadRequest {
		t.Fatalf("another tenant's id: %d %+v", resp2.StatusCode, p)
	}
	w.token = ""
	if resp := w.get(t, "/v1/mcp/watch", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
}

// A position of a store the server no longer has (the same key, another
// history: mcpd --dev restarted) is 410 cursor-expired.
func TestWatchExpiredCursor(t *testing.T) {
	key := []byte(strings.Repeat("c", 32))
	a := startWatchServer(t, key, 0)
	a.register(t, "alpha", 0, 0)
	resp := a.get(t, "/v1/mcp/audit", nil)
	var page api.EventList
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || len(page.Events) != 1 {
		t.Fatalf("audit: %+v %v", page, err)
	}
	resp.Body.Close()
	b := startWatchServer(t, key, 0)
	b.tenant, b.token = a.tenant, a.token
	for _, c := range []struct {
		path   string
		header map[string]string
	}{
		{"/v1/mcp/watch?cursor=" + page.WatchCursor, nil},
		{"/v1/mcp/watch", map[string]string{"Last-Event-ID": page.WatchCursor}},
		{"/v1/mcp/audit?cursor=" + page.WatchCursor, nil},
	} {
		resp := b.get(t, c.path, c.header)
		if p := problemOf(t, resp); resp.StatusCode != http.StatusGone || !strings.HasSuffix(p.Type, "/cursor-expired") {
			t.Fatalf("%s: %d %+v, want 410 cursor-expired", c.path, resp.StatusCode, p)
		}
	}
}

// A client that stops reading is disconnected once a write has waited
// the stream write timeout; the server holds no more than what the socket
// buffers take.
func TestWatchSlowConsumerCutOff(t *testing.T) {
	w := startWatchServer(t, nil, 300*time.Millisecond)
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(w.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/mcp/watch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", w.token)
	br := bufio.NewReaderSize(conn, 512)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("status line %q %v", status, err)
	}
	// Registrations with 256 skills of 100 characters: ~26 KB an event,
	// 400 of them ~10 MB, more than loopback's socket buffers hold.
	for i := range 400 {
		w.register(t, fmt.Sprintf("m%03d", i), 256, 100)
	}
	testwait.Until(t, "the slow client cut off", 20*time.Second, func() bool {
		return gathered(t, w.metrics, "mcpd_watch_stream_cutoffs_total") >= 1
	})
	// What was sent before the cut-off is still readable; then the stream
	// ends.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, br)
	if err != nil {
		t.Fatalf("after the cut-off: %v (read %d bytes)", err, n)
	}
	t.Logf("cut off after %d bytes reached the client", n)
}

// gathered returns the value of the counter or gauge name of m's registry.
func gathered(t *testing.T, m *api.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) == 0 {
			continue
		}
		mt := f.GetMetric()[0]
		if c := mt.GetCounter(); c != nil {
			return c.GetValue()
		}
		return mt.GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// A stream outlives the server's ReadTimeout (mcpd's is 30 s): the read
// deadline of the request is lifted once the stream starts, or the
// connection's background read would time out and end the stream.
func TestWatchOutlivesReadTimeout(t *testing.T) {
	w := startWatchServerReading(t, []byte(strings.Repeat("c", 32)), 0, 200*time.Millisecond)
	store, tenant := w.store, w.tenant
	req, _ := http.NewRequest(http.MethodGet, w.url+"/v1/mcp/watch", nil)
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %v %v", resp, err)
	}
	defer resp.Body.Close()
	// Past the read timeout, then an event: it must still arrive.
	time.Sleep(600 * time.Millisecond)
	if _, _, _, err := store.Register(context.Background(), tenant, registry.ServerInfo{
		ModuleName: "late", Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "id: ") {
		t.Fatalf("after the read timeout: %q %v", line, err)
	}
}
