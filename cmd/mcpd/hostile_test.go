package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// Hostile input against the real binary on PostgreSQL. The contract's
// bad-input table is covered call by call in pkg/api (handler_test.go,
// over the memory store); what is here is what only the real process and
// the real database can show: input PostgreSQL refuses that the memory
// store takes, the HTTP server's own limits (headers, slow clients, idle
// connections), and, after all of it, no 5xx, no panic, no goroutine left
// behind and no half-written row.

// Limits of mcpd's HTTP server (pkg/daemon).
const (
	maxHeaderBytes    = 64 << 10
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
)

// hostile is a client for hand-made requests, counting every status it
// gets.
type hostile struct {
	base  string
	token string
	hc    *http.Client

	mu       sync.Mutex
	statuses map[int]int
	// busy counts the 503s of valid requests retried because the store
	// was past its deadline (a loaded machine), not because of their input.
	busy atomic.Int64
}

func newHostile(t *testing.T, p *proc, tenant uuid.UUID) *hostile {
	h := &hostile{base: "http://" + p.addr, token: p.token(t, tenant), statuses: map[int]int{},
		hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}}
	t.Cleanup(h.hc.CloseIdleConnections)
	return h
}

// do sends a request; token "" sends h's token, "-" none.
func (h *hostile) do(t *testing.T, method, path, token string, header http.Header, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	switch token {
	case "":
		req.Header.Set("Authorization", "Bearer "+h.token)
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	h.mu.Lock()
	h.statuses[resp.StatusCode]++
	h.mu.Unlock()
	return resp.StatusCode, resp.Header, b
}

// want sends a request and fails unless it answers status; a problem
// must name field when field is not empty.
func (h *hostile) want(t *testing.T, status int, field, method, path, token string, header http.Header, body string) []byte {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	code, hdr, b := h.do(t, method, path, token, header, r)
	if code != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, truncated(b), status)
	}
	if status >= 400 {
		var p api.Problem
		if err := json.Unmarshal(b, &p); err != nil || p.Status != status || hdr.Get("Content-Type") != api.ContentTypeProblem {
			t.Fatalf("%s %s: not a problem: %s %s", method, path, hdr.Get("Content-Type"), truncated(b))
		}
		if field != "" && p.Field != field {
			t.Fatalf("%s %s: field %q, want %q: %s", method, path, p.Field, field, truncated(b))
		}
	}
	return b
}

func truncated(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func registerJSON(module string, extra string) string {
	return `{"module_name":"` + module + `","version":"1.0.0","supported_protocols":["2025-06-18"]` + extra + `}`
}

// metricValue sums the samples of a metric family whose labels match re.
func metricValue(text, name string, re *regexp.Regexp) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) || (re != nil && !re.MatchString(line)) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func TestHostileInput(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	p := startMcpd(t, db.AppURL, "--log-level", "debug")
	tenant := uuid.New()
	h := newHostile(t, p, tenant)
	const regPath = "/v1/mcp/servers/register"
	valid := map[string]int{} // module -> skills, of the registrations that must be there

	t.Run("store-level input", func(t *testing.T) {
		// PostgreSQL refuses what the memory store takes: NUL in text and
		// jsonb, lone surrogates in jsonb. Each must be a 400 naming the
		// field, never a 500; so is any string that is not valid Unicode.
		for _, c := range []struct{ name, extra, field string }{
			{"nul in skill name", `,"skills":[{"name":"a\u0000b"}]`, "skills[0].name"},
			{"nul in skill description", `,"skills":[{"name":"a","description":"x\u0000"}]`, "skills[0].description"},
			{"nul in capabilities", `,"capability_advertisement":{"a":"\u0000"}`, "capability_advertisement"},
			{"nul key in capabilities", `,"capability_advertisement":{"\u0000":1}`, "capability_advertisement"},
			{"bad utf-8 in capabilities", ",\"capability_advertisement\":{\"a\":\"\xff\"}", "capability_advertisement"},
			// jsonb refuses a lone surrogate escape (22P02): it was a 500.
			{"lone surrogate in capabilities", `,"capability_advertisement":{"a":"\ud800"}`, "capability_advertisement"},
			{"lone surrogate key in capabilities", `,"capability_advertisement":{"\udc00":1}`, "capability_advertisement"},
			// One rule for every string: encoding/json would store U+FFFD.
			{"bad utf-8 in skill name", ",\"skills\":[{\"name\":\"\xff\xfe\"}]", "skills[0].name"},
			{"lone surrogate in skill name", `,"skills":[{"name":"a\ud800"}]`, "skills[0].name"},
			// Nesting past registry.MaxCapabilityDepth, even past what
			// encoding/json itself parses (10,000).
			{"deep capabilities", `,"capability_advertisement":` + nested(registry.MaxCapabilityDepth+1), "capability_advertisement"},
			{"very deep capabilities", `,"capability_advertisement":` + nested(20000), "capability_advertisement"},
			// 9 KB that jsonb stores as 131 MB (1,000 numbers of 131,072
			// digits): was a 201, and every read of it a 131 MB answer.
			{"expanding numbers", `,"capability_advertisement":{"n":[1E131071` + strings.Repeat(",1E131071", 999) + `]}`,
				"capability_advertisement"},
			{"capabilities past 64 KiB", `,"capability_advertisement":{"x":"` + strings.Repeat("x", registry.MaxCapabilityBytes-8) + `"}`,
				"capability_advertisement"},
			{"line break in title", `,"title":"a\nb"`, "title"},
			{"bidi override in description", `,"description":"\u202egnp.exe"`, "description"},
			{"bidi override in a skill's description", `,"skills":[{"name":"s","description":"\u202egnp.exe"}]`, "skills[0].description"},
		} {
			h.want(t, http.StatusBadRequest, c.field, http.MethodPost, regPath, "", nil, registerJSON("nul", c.extra))
		}
		// Taken as they are: the largest advertisement (stored as
		// {"x": "…"}, 9 bytes around the text), the deepest nesting, odd text.
		deep := nested(registry.MaxCapabilityDepth)
		big := strings.Repeat("x", registry.MaxCapabilityBytes-9)
		var skills []string
		for i := range registry.MaxSkills {
			skills = append(skills, fmt.Sprintf(`{"name":"%s-%03d"}`, strings.Repeat("s", 120), i))
		}
		for _, c := range []struct {
			module, extra string
			skills        int
		}{
			{"deep", `,"capability_advertisement":` + deep, 0},
			{"big", `,"capability_advertisement":{"x":"` + big + `"}`, 0},
			{"many-skills", `,"skills":[` + strings.Join(skills, ",") + `]`, registry.MaxSkills},
			{"unicode", `,"skills":[{"name":"日本語 ✓ \ud83d\ude00","description":"\u200b rtl עברית"}]`, 1},
			{"escapes", `,"capability_advertisement":{"q":"'; DROP TABLE mcp_servers; --","b":"\\\"\\\\","c":"\\u0000"}`, 0},
		} {
			// A valid registration may meet a store past its deadline on a
			// loaded machine: 503, retry later (counted apart below).
			var (
				code int
				b    []byte
			)
			testwait.Until(t, "register "+c.module, time.Minute, func() bool {
				code, _, b = h.do(t, http.MethodPost, regPath, "", nil, strings.NewReader(registerJSON(c.module, c.extra)))
				if code == http.StatusServiceUnavailable {
					h.busy.Add(1)
					return false
				}
				return true
			})
			if code != http.StatusCreated {
				t.Fatalf("register %s: %d %s", c.module, code, truncated(b))
			}
			valid[c.module] = c.skills
		}
	})

	t.Run("transport-level input", func(t *testing.T) {
		// A body over the limit without Content-Length (chunked).
		pr, pw := io.Pipe()
		go func() {
			if _, err := io.WriteString(pw, `{"module_name":"`); err != nil {
				return
			}
			chunk := []byte(strings.Repeat("a", 32<<10))
			for range 40 { // 1.25 MiB, far beyond the limit
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			_ = pw.Close()
		}()
		code, _, b := h.do(t, http.MethodPost, regPath, "", nil, pr)
		_ = pr.Close()
		if code != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked 1.25 MiB body: %d %s", code, truncated(b))
		}
		// Headers over MaxHeaderBytes: 431 from the HTTP server.
		huge := http.Header{"X-Huge": {strings.Repeat("h", maxHeaderBytes+8<<10)}}
		if code, _, _ := h.do(t, http.MethodGet, "/healthz", "-", huge, nil); code != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("huge header: %d, want 431", code)
		}
		many := http.Header{}
		for i := range 2000 {
			many.Set(fmt.Sprintf("X-Many-%d", i), "v")
		}
		if code, _, _ := h.do(t, http.MethodGet, "/v1/mcp/servers", "", many, nil); code != http.StatusOK {
			t.Fatalf("2000 headers: %d", code)
		}
		tooMany := http.Header{}
		for i := range 8000 {
			tooMany.Set(fmt.Sprintf("X-Many-%d", i), "value")
		}
		if code, _, _ := h.do(t, http.MethodGet, "/v1/mcp/servers", "", tooMany, nil); code != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("8000 headers: %d, want 431", code)
		}
		// Two Authorization headers, the first one bad: refused.
		two := http.Header{"Authorization": {"Bearer not.a.token", "Bearer " + h.token}}
		h.want(t, http.StatusUnauthorized, "", http.MethodGet, "/v1/mcp/servers", "-", two, "")
		// A token far beyond any real one.
		h.want(t, http.StatusUnauthorized, "", http.MethodGet, "/v1/mcp/servers", strings.Repeat("a.", 20<<10)+"a", nil, "")
		// The operational endpoints ignore a bad token.
		h.want(t, http.StatusOK, "", http.MethodGet, "/healthz", "garbage", nil, "")
	})

	t.Run("malformed traceparent", func(t *testing.T) {
		for i, tp := range []string{
			"garbage", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
			"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
			"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero parent id
			"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
			"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", // 31 digits
			"00-4bf92f3577b34da6a3ce929d0e0e4736x-00f067aa0ba902b7-01",
			strings.Repeat("00-", 10000), "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		} {
			module := fmt.Sprintf("trace-%02d", i)
			hdr := http.Header{"Traceparent": {tp}}
			b := h.want(t, http.StatusCreated, "", http.MethodPost, regPath, "", hdr, registerJSON(module, ""))
			var srv registry.Server
			if err := json.Unmarshal(b, &srv); err != nil {
				t.Fatal(err)
			}
			if !registry.ValidTraceID(srv.TraceID) || strings.Contains(strings.ToLower(tp), srv.TraceID) {
				t.Fatalf("traceparent %q gave trace_id %q: want a new random one", truncated([]byte(tp)), srv.TraceID)
			}
			valid[module] = 0
		}
	})

	t.Run("slow clients", func(t *testing.T) {
		// Headers dribbled one byte a while: closed by ReadHeaderTimeout.
		// A body never finished: closed by ReadTimeout. Meanwhile mcpd
		// serves everyone else at once.
		dribble := func() (time.Duration, error) {
			conn, err := net.Dial("tcp", p.addr)
			if err != nil {
				return 0, err
			}
			defer conn.Close()
			t0 := time.Now()
			if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: mcpd\r\n"); err != nil {
				return 0, err
			}
			for i := 0; time.Since(t0) < readHeaderTimeout+10*time.Second; i++ {
				if _, err := fmt.Fprintf(conn, "X-%d: v\r\n", i); err != nil {
					return time.Since(t0), nil // closed by mcpd
				}
				_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
					return time.Since(t0), nil
				}
			}
			return 0, fmt.Errorf("connection still open after %s of dribbled headers", time.Since(t0))
		}
		unfinished := func() (time.Duration, error) {
			conn, err := net.Dial("tcp", p.addr)
			if err != nil {
				return 0, err
			}
			defer conn.Close()
			t0 := time.Now()
			if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: mcpd\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"module_name\":", regPath, h.token); err != nil {
				return 0, err
			}
			_ = conn.SetReadDeadline(time.Now().Add(readTimeout + 15*time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			took := time.Since(t0)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode >= 500 {
					return took, fmt.Errorf("unfinished body answered %d", resp.StatusCode)
				}
				return took, nil // an answer before the close is fine, a 5xx is not
			}
			if isTimeout(err) {
				return took, fmt.Errorf("connection still open after %s with an unfinished body", took)
			}
			return took, nil
		}
		type result struct {
			took time.Duration
			err  error
		}
		slowHeaders, slowBody := make(chan result, 1), make(chan result, 1)
		go func() { d, err := dribble(); slowHeaders <- result{d, err} }()
		go func() { d, err := unfinished(); slowBody <- result{d, err} }()
		// Responsive meanwhile.
		var worst time.Duration
		deadline := time.Now().Add(readTimeout + 20*time.Second)
		var hr, br *result
		for (hr == nil || br == nil) && time.Now().Before(deadline) {
			t0 := time.Now()
			h.want(t, http.StatusOK, "", http.MethodGet, "/v1/mcp/servers?limit=1", "", nil, "")
			worst = max(worst, time.Since(t0))
			select {
			case r := <-slowHeaders:
				hr = &r
			case r := <-slowBody:
				br = &r
			case <-time.After(100 * time.Millisecond):
			}
		}
		if hr == nil || br == nil {
			t.Fatal("slow clients not done in time")
		}
		if hr.err != nil || br.err != nil {
			t.Fatalf("slow headers: %v; slow body: %v", hr.err, br.err)
		}
		if hr.took < readHeaderTimeout-time.Second || hr.took > readHeaderTimeout+5*time.Second {
			t.Fatalf("dribbled headers closed after %s, ReadHeaderTimeout is %s", hr.took, readHeaderTimeout)
		}
		if br.took < readTimeout-time.Second || br.took > readTimeout+10*time.Second {
			t.Fatalf("unfinished body closed after %s, ReadTimeout is %s", br.took, readTimeout)
		}
		t.Logf("FIGURE slow clients: dribbled headers closed after %s (ReadHeaderTimeout %s), unfinished body "+
			"closed after %s (ReadTimeout %s); worst latency of other calls meanwhile %s",
			hr.took.Round(time.Millisecond), readHeaderTimeout, br.took.Round(time.Millisecond), readTimeout,
			worst.Round(time.Millisecond))
	})

	t.Run("idle connections", func(t *testing.T) {
		const n = 500
		metricsURL := "http://" + p.addr + "/metrics"
		base := metricValue(get(t, metricsURL), "go_goroutines", nil)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for i := range n {
			c, err := net.Dial("tcp", p.addr)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			conns = append(conns, c)
			if i%2 == 1 {
				// Half of them after one request, kept alive.
				if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: mcpd\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("request on connection %d: %v", i, err)
				}
				resp.Body.Close()
			}
		}
		t0 := time.Now()
		for range 20 {
			h.want(t, http.StatusOK, "", http.MethodGet, "/v1/mcp/servers?limit=1", "", nil, "")
		}
		took := time.Since(t0)
		peak := metricValue(get(t, metricsURL), "go_goroutines", nil)
		for _, c := range conns {
			_ = c.Close()
		}
		conns = nil
		var after float64
		testwait.Until(t, "goroutines back after the idle connections closed", pollCap, func() bool {
			after = metricValue(get(t, metricsURL), "go_goroutines", nil)
			return after <= base+10
		})
		if took > 5*time.Second {
			t.Fatalf("20 calls took %s beside %d idle connections", took, n)
		}
		t.Logf("FIGURE idle connections: %d open (half after a request), 20 calls beside them in %s; mcpd "+
			"goroutines %.0f before, %.0f with them, %.0f after", n, took.Round(time.Millisecond), base, peak, after)
	})

	// After all of it: no 5xx, no panic, no half-written row, and only the
	// registrations that were accepted.
	metrics := get(t, "http://"+p.addr+"/metrics")
	busy := h.busy.Load()
	if n := metricValue(metrics, "mcpd_http_request_duration_seconds_count", regexp.MustCompile(`code="5\d\d"`)); n != float64(busy) {
		t.Fatalf("mcpd answered %v 5xx, %d of them 503s of valid requests retried:\n%s", n, busy,
			strings.Join(grepLinesPrefix(metrics, "mcpd_http_request_duration_seconds_count"), "\n"))
	}
	for code, n := range h.statuses {
		if code >= 500 && (code != http.StatusServiceUnavailable || int64(n) != busy) {
			t.Fatalf("statuses seen: %v (%d 503s of valid requests retried)", h.statuses, busy)
		}
	}
	if busy > 0 {
		t.Logf("%d valid registrations met a store past its deadline (503) and were retried", busy)
	}
	assertNoPanic(t, "mcpd", p.stderr.String())
	st := readState(t, db.Admin)
	assertConsistent(t, st, func(m string) int { return valid[m] })
	if len(st.servers) != len(valid) {
		var got []string
		for _, s := range st.servers {
			got = append(got, s.module)
		}
		t.Fatalf("%d servers in the database, %d registrations accepted: %v", len(st.servers), len(valid), got)
	}
	t.Logf("FIGURE hostile input: statuses %v; 0 5xx, 0 panics, %d rows all consistent", h.statuses, len(st.servers))
}

func isTimeout(err error) bool {
	var ne net.Error
	return err != nil && errors.As(err, &ne) && ne.Timeout()
}

// TestNoSecretInLogs runs mcpd at debug level through good and bad calls
// and a database URL with a password, then reads every line it logged: the
// HS256 secret, the tokens (whole, or their signature or claims part) and
// the password must not appear, nor in any answer.
func TestNoSecretInLogs(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	dbURL, password := withPassword(t, db.AppURL)
	p := startMcpd(t, dbURL, "--log-level", "debug")
	tenant := uuid.New()
	h := newHostile(t, p, tenant)
	ctx := context.Background()
	c := p.client(t, tenant)
	srv, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "secretive", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, srv.ServerID); err != nil {
		t.Fatal(err)
	}
	expired, err := auth.Issue(p.secret, tenant, "e2e", "mcp:read mcp:write", time.Second, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := auth.Issue([]byte(strings.Repeat("other-secret-", 4)), tenant, "e2e", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	readOnly, err := auth.Issue(p.secret, tenant, "e2e", "mcp:read", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tampered := h.token[:len(h.token)-4] + "AAAA"
	var answers []string
	for _, tok := range []string{h.token, expired, foreign, readOnly, tampered} {
		for _, r := range []struct{ method, path, body string }{
			{http.MethodGet, "/v1/mcp/servers", ""},
			{http.MethodPost, "/v1/mcp/servers/heartbeat", `{"server_id":"` + srv.ServerID.String() + `"}`},
			{http.MethodPost, "/v1/mcp/servers/heartbeat", `{"server_id":"` + uuid.NewString() + `"}`},
			{http.MethodGet, "/v1/mcp/audit", ""},
		} {
			var body io.Reader
			if r.body != "" {
				body = strings.NewReader(r.body)
			}
			code, _, b := h.do(t, r.method, r.path, tok, nil, body)
			if code >= 500 {
				t.Fatalf("%s %s: %d", r.method, r.path, code)
			}
			answers = append(answers, string(b))
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(pollCap):
		t.Fatal("mcpd did not stop")
	}
	logs := p.stderr.String()
	if len(logLines(logs, `"msg":"http request"`)) < 20 {
		t.Fatalf("the debug log lacks the request lines:\n%s", logs)
	}
	secrets := map[string]string{"the HS256 secret": string(p.secret)}
	if password != "" {
		secrets["the database password"] = password
	}
	for name, tok := range map[string]string{"token": h.token, "expired token": expired, "foreign token": foreign,
		"read-only token": readOnly, "tampered token": tampered} {
		parts := strings.Split(tok, ".")
		secrets[name] = tok
		secrets[name+" claims"] = parts[1]
		secrets[name+" signature"] = parts[2]
	}
	for name, s := range secrets {
		if strings.Contains(logs, s) {
			t.Fatalf("mcpd logged %s", name)
		}
		for _, a := range answers {
			if strings.Contains(a, s) {
				t.Fatalf("an answer holds %s: %s", name, a)
			}
		}
	}
	t.Logf("FIGURE secrets: %d log lines at debug level, %d answers: none holds the secret, a token or a part of "+
		"one, or the database password", len(logLines(logs)), len(answers))
}

// withPassword returns url with a password for its user (the test
// cluster trusts loopback logins, so any password connects), and the
// password; a URL that has one already is returned as it is.
func withPassword(t *testing.T, url string) (string, string) {
	t.Helper()
	m := regexp.MustCompile(`^(postgres(?:ql)?://)([^:@/]+)(:[^@/]*)?@`).FindStringSubmatch(url)
	if m == nil {
		t.Fatalf("database URL %q has no user", url)
	}
	if m[3] != "" {
		return url, strings.TrimPrefix(m[3], ":")
	}
	const password = "pw-d0-not-log-me-5eCr3t"
	return m[1] + m[2] + ":" + password + "@" + strings.TrimPrefix(url, m[0]), password
}

// nested is a JSON object that nests objects depth levels deep.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}
