package mcpserve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/mcpserve"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// rawSession is a bare MCP client of one revision that holds a stream
// subscribed to one resource and timestamps each resources/updated on it.
type rawSession struct {
	body io.ReadCloser
	got  chan time.Time
}

// benchClient is an HTTP client for many long streams to one host.
func benchClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2000
	return &http.Client{Transport: tr}
}

func rawRequest(ctx context.Context, method, url, token, rev, mcpMethod, session, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if rev != "" {
		req.Header.Set("Mcp-Protocol-Version", rev)
	}
	if mcpMethod != "" {
		req.Header.Set("Mcp-Method", mcpMethod)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	return req
}

// What the 2025-11-25 sessions of openRaw say of themselves.
var (
	benchClientName   = "bench"
	benchCapabilities = "{}"
)

// openRaw opens a subscribed stream on rev: on 2026-07-28 one
// subscriptions/listen call; on 2025-11-25 initialize, initialized,
// resources/subscribe and the GET stream.
func openRaw(ctx context.Context, hc *http.Client, url, token, rev, uri string) (*rawSession, error) {
	do := func(req *http.Request) (*http.Response, error) {
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode/100 != 2 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return nil, fmt.Errorf("%s %s: %d %s", req.Method, req.Header.Get("Mcp-Method"), resp.StatusCode, b)
		}
		return resp, nil
	}
	var stream *http.Response
	if rev == rev2026 {
		body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},` +
			`"notifications":{"resourceSubscriptions":["` + uri + `"]}}}`
		resp, err := do(rawRequest(ctx, http.MethodPost, url, token, rev, "subscriptions/listen", "", body))
		if err != nil {
			return nil, err
		}
		stream = resp
	} else {
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
			`"capabilities":` + benchCapabilities + `,"clientInfo":{"name":"` + benchClientName + `","version":"1"}}}`
		resp, err := do(rawRequest(ctx, http.MethodPost, url, token, "", "", "", init))
		if err != nil {
			return nil, err
		}
		session := resp.Header.Get("Mcp-Session-Id")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		for _, call := range []string{
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`,
		} {
			resp, err := do(rawRequest(ctx, http.MethodPost, url, token, rev, "", session, call))
			if err != nil {
				return nil, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if stream, err = do(rawRequest(ctx, http.MethodGet, url, token, rev, "", session, "")); err != nil {
			return nil, err
		}
	}
	s := &rawSession{body: stream.Body, got: make(chan time.Time, 64)}
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), "notifications/resources/updated") {
				s.got <- time.Now()
			}
		}
		close(s.got)
	}()
	return s, nil
}

// openSessions opens n subscribed sessions, half on each revision.
func openSessions(ctx context.Context, b *testing.B, hc *http.Client, url, token, uri string, n int) []*rawSession {
	b.Helper()
	sessions := make([]*rawSession, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := openRaw(ctx, hc, url, token, revisions[i%2], uri)
			if err != nil {
				errs <- err
				return
			}
			sessions[i] = s
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, s := range sessions {
			s.body.Close()
		}
	})
	return sessions
}

// BenchmarkNotify1000Sessions measures the time from the commit of a
// provider's transition (from just before the sweep or heartbeat that
// writes its audit event) to its notifications/resources/updated on each
// of 1,000 subscribed sessions (half 2026-07-28 listen streams, half
// 2025-11-25 sessions with their GET stream), over the loopback
// interface; client and server share the process. Each iteration is one
// transition (death, then recovery), a second apart on the fake clock so
// that coalescing holds none back.
func BenchmarkNotify1000Sessions(b *testing.B) {
	const n = 1000
	e := setup(b, envOptions{maxPerSubject: -1}) // one token opens every session
	tenant := uuid.New()
	srv := e.register(b, tenant, "search-a", "search")
	tok := e.token(b, tenant, "mcp:read")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sessions := openSessions(ctx, b, benchClient(), e.url, tok, mcpserve.SkillURI("search"), n)
	testwait.Until(b, "every session subscribed", time.Minute, func() bool { return e.mcp.Subscribed(tenant) >= n })

	var lat []time.Duration
	dead := false
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		e.clock.Advance(2 * time.Second)
		start := time.Now()
		if dead {
			e.heartbeat(b, tenant, srv.ServerID)
		} else {
			e.sweep(b, 3*testInterval)
		}
		dead = !dead
		for _, s := range sessions {
			select {
			case at, ok := <-s.got:
				if !ok {
					b.Fatal("a stream ended")
				}
				lat = append(lat, at.Sub(start))
			case <-time.After(time.Minute):
				b.Fatal("a session was not notified within a minute")
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// BenchmarkIdleSession measures the memory of idle subscribed sessions
// (half on each revision): the heap and stacks of the process (mcpd and
// the bare clients) per session, and the same for as many plain hanging
// SSE streams, so that the difference is what an MCP session adds in mcpd.
// "small" sessions describe themselves in a few bytes; "bound" ones send
// clientInfo and capabilities of almost MaxClientInfoBytes each, the most
// a session may hold.
func BenchmarkIdleSession(b *testing.B) {
	b.Run("small", func(b *testing.B) { benchIdleSession(b) })
	b.Run("bound", func(b *testing.B) {
		fill := strings.Repeat("x", mcpserve.MaxClientInfoBytes-64)
		benchClientName, benchCapabilities = fill, `{"experimental":{"x":"`+fill+`"}}`
		defer func() { benchClientName, benchCapabilities = "bench", "{}" }()
		benchIdleSession(b)
	})
}

func benchIdleSession(b *testing.B) {
	const n = 1000
	e := setup(b, envOptions{maxPerSubject: -1}) // one token opens every session
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The baseline: plain streams that flush their headers and hang.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	defer plain.Close()

	for range b.N {
		// A tenant of its own each round, whose subscriptions are counted
		// from zero.
		tenant := uuid.New()
		e.register(b, tenant, "search-a", "search")
		tok := e.token(b, tenant, "mcp:read")
		hc := benchClient()
		before := inUse()
		var bodies []io.Closer
		for range n {
			resp, err := hc.Do(rawRequest(ctx, http.MethodGet, plain.URL, tok, "", "", "", ""))
			if err != nil {
				b.Fatal(err)
			}
			bodies = append(bodies, resp.Body)
		}
		perPlain := float64(inUse()-before) / n
		for _, c := range bodies {
			c.Close()
		}
		hc.CloseIdleConnections()

		hc = benchClient()
		before = inUse()
		sessions := openSessions(ctx, b, hc, e.url, tok, mcpserve.SkillURI("search"), n)
		testwait.Until(b, "every session subscribed", time.Minute, func() bool { return e.mcp.Subscribed(tenant) >= int64(n) })
		perSession := float64(inUse()-before) / n
		for _, s := range sessions {
			s.body.Close()
		}
		hc.CloseIdleConnections()
		b.ReportMetric(perSession/1024, "KiB/session")
		b.ReportMetric(perPlain/1024, "KiB/plain-stream")
		b.ReportMetric((perSession-perPlain)/1024, "KiB/mcp-added")
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// inUse is the heap and stack memory in use after a collection.
func inUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
