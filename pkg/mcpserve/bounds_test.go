package mcpserve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/mcpserve"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// rpcAnswer is one answer of send: its status, headers and message (the
// first data line of an event stream, or the JSON body).
type rpcAnswer struct {
	status int
	header http.Header
	raw    string
	msg    map[string]any
}

// code is the answer's JSON-RPC error code, 0 without one.
func (a rpcAnswer) code() int {
	e, _ := a.msg["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return int(c)
}

func (a rpcAnswer) message() string {
	e, _ := a.msg["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// send posts one raw body on rev (empty: a legacy request without the
// header) in session (empty: none).
func (e *env) send(t *testing.T, token, rev, session, body string) rpcAnswer {
	t.Helper()
	var m struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal([]byte(body), &m)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if rev != "" {
		req.Header.Set("Mcp-Protocol-Version", rev)
	}
	if rev >= rev2026 && m.Method != "" {
		req.Header.Set("Mcp-Method", m.Method)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := rpcAnswer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	if i := strings.Index(string(b), "data: "); i >= 0 {
		b = []byte(strings.SplitN(string(b[i+len("data: "):]), "\n", 2)[0])
	}
	_ = json.Unmarshal(b, &a.msg)
	return a
}

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// initialize opens a 2025-11-25 session by hand and returns its id.
func (e *env) initialize(t *testing.T, token string) string {
	t.Helper()
	a := e.send(t, token, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	id := a.header.Get("Mcp-Session-Id")
	if a.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", a.status, a.raw)
	}
	if a := e.send(t, token, rev2025, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status/100 != 2 {
		t.Fatalf("initialized: %d %s", a.status, a.raw)
	}
	return id
}

// listenTo opens a subscriptions/listen stream on uris; the caller closes
// the answer's body.
func (e *env) listenTo(ctx context.Context, t *testing.T, token string, uris ...string) *http.Response {
	t.Helper()
	b, _ := json.Marshal(uris)
	body := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{` + meta2026 +
		`,"notifications":{"resourceSubscriptions":` + string(b) + `}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", rev2026)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// getStream opens a 2025-11-25 session's GET stream; the caller closes
// the answer's body.
func (e *env) getStream(ctx context.Context, t *testing.T, token, session string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", rev2025)
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET stream: %d %s", resp.StatusCode, b)
	}
	return resp
}

// rpcCode is the JSON-RPC code of an SDK client's error, 0 if none.
func rpcCode(err error) int64 {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

// TestSubscriptionBounds: a 2025-11-25 session subscribes to at most 64
// resources, and a URI whose name breaks the rules (a skill name past 128
// characters, a module name that is none, 200,000 characters) is refused
// with -32602 and not held; a 2026-07-28 listen call likewise.
func TestSubscriptionBounds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tenant := uuid.New()
	tok := e.token(t, tenant, "mcp:read")
	cs, _ := e.connect(t, tok, rev2025)
	for _, uri := range []string{
		mcpserve.SkillURI(strings.Repeat("s", 129)),
		mcpserve.SkillURIPrefix + strings.Repeat("x", 200_000),
		mcpserve.SkillURIPrefix,
		mcpserve.SkillURIPrefix + "%zz",
		mcpserve.ServerURIPrefix + "Not_A_Module",
		mcpserve.ServerURIPrefix + strings.Repeat("m", 64),
		"https://example.com/x",
	} {
		err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri})
		if rpcCode(err) != jsonrpc.CodeInvalidParams || strings.Contains(err.Error(), "Go ") {
			t.Fatalf("subscribe %.60q: %v, want -32602 in plain words", uri, err)
		}
	}
	if n := e.mcp.Subscriptions(tenant); n != 0 {
		t.Fatalf("%d subscriptions held after refusals", n)
	}
	// The longest names allowed are fine.
	for _, uri := range []string{mcpserve.SkillURI(strings.Repeat("é", 128)), mcpserve.ServerURI("m" + strings.Repeat("0", 62))} {
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %.60q: %v", uri, err)
		}
		if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range mcpserve.MaxSubscriptions {
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: mcpserve.SkillURI(fmt.Sprint("skill-", i))}); err != nil {
			t.Fatalf("subscription %d: %v", i+1, err)
		}
	}
	// Again to one it has: no new subscription.
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: mcpserve.SkillURI("skill-0")}); err != nil {
		t.Fatalf("subscribing again: %v", err)
	}
	err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: mcpserve.SkillURI("one-too-many")})
	if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "64") {
		t.Fatalf("subscription 65: %v, want -32602 naming the limit", err)
	}
	if n := e.mcp.Subscriptions(tenant); n != mcpserve.MaxSubscriptions {
		t.Fatalf("%d subscriptions held, want %d", n, mcpserve.MaxSubscriptions)
	}
	// Unsubscribing makes room; another session has its own 64.
	if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: mcpserve.SkillURI("skill-0")}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: mcpserve.SkillURI("one-too-many")}); err != nil {
		t.Fatalf("after unsubscribing: %v", err)
	}
	other, _ := e.connect(t, tok, rev2025)
	if err := other.Subscribe(t.Context(), &mcp.SubscribeParams{URI: mcpserve.SkillURI("skill-1")}); err != nil {
		t.Fatalf("another session: %v", err)
	}
	// A session that ends leaves nothing held.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ended sessions' subscriptions forgotten", func() bool { return e.mcp.Subscriptions(tenant) == 0 })

	// 2026-07-28: one listen call of 65 resources, or of one bad name.
	uris := make([]string, mcpserve.MaxSubscriptions+1)
	for i := range uris {
		uris[i] = mcpserve.SkillURI(fmt.Sprint("skill-", i))
	}
	for name, list := range map[string][]string{
		"65 resources":  uris,
		"a long name":   {mcpserve.SkillURI(strings.Repeat("s", 129))},
		"a bad module":  {mcpserve.ServerURIPrefix + "UPPER"},
		"200,000 chars": {mcpserve.SkillURIPrefix + strings.Repeat("x", 200_000)},
	} {
		resp := e.listenTo(t.Context(), t, tok, list...)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"code":-32602`) {
			t.Fatalf("listen to %s: %d %.300s, want 400 with -32602", name, resp.StatusCode, b)
		}
	}
	if n := e.mcp.Subscriptions(tenant); n != 0 {
		t.Fatalf("%d subscriptions held after refused listens", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := e.listenTo(ctx, t, tok, uris[:mcpserve.MaxSubscriptions]...)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listen to 64: %d", resp.StatusCode)
	}
	waitFor(t, "64 subscriptions of the listen call", func() bool { return e.mcp.Subscriptions(tenant) == mcpserve.MaxSubscriptions })
	cancel()
	waitFor(t, "the listen call's subscriptions forgotten", func() bool { return e.mcp.Subscriptions(tenant) == 0 })
}

// waitFor waits for cond as every wait of the tests does (testwait).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, what, cond)
}

// TestClientInfoBounds: clientInfo and capabilities of more than 16 KiB
// are refused with -32602 naming the field, and open no session.
func TestClientInfoBounds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tenant := uuid.New()
	tok := e.token(t, tenant, "mcp:read")
	big := strings.Repeat("x", mcpserve.MaxClientInfoBytes)

	// The SDK's client with a 16 KiB name is told why.
	client := mcp.NewClient(&mcp.Implementation{Name: big, Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: e.url,
		HTTPClient: &http.Client{Transport: bearer{token: tok, next: http.DefaultTransport}}}
	_, err := client.Connect(t.Context(), transport, &mcp.ClientSessionOptions{ProtocolVersion: rev2025})
	if err == nil || !strings.Contains(err.Error(), "params.clientInfo is larger than 16384 bytes") {
		t.Fatalf("connect with a 16 KiB clientInfo: %v", err)
	}
	for field, body := range map[string]string{
		"params.clientInfo": `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
			`"capabilities":{},"clientInfo":{"name":"` + big + `","version":"1"}}}`,
		"params.capabilities": `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
			`"capabilities":{"experimental":{"x":"` + big + `"}},"clientInfo":{"name":"t","version":"1"}}}`,
	} {
		a := e.send(t, tok, "", "", body)
		if a.status != http.StatusOK || a.code() != jsonrpc.CodeInvalidParams || !strings.Contains(a.message(), field) ||
			a.header.Get("Mcp-Session-Id") != "" || a.msg["id"] != float64(1) {
			t.Fatalf("initialize with a big %s: %d %.200s", field, a.status, a.raw)
		}
	}
	if n := e.mcp.Sessions(tenant); n != 0 {
		t.Fatalf("%d sessions opened by refused initialize calls", n)
	}
	for field, m := range map[string]string{
		"io.modelcontextprotocol/clientInfo": `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"` + big + `","version":"1"}}`,
		"io.modelcontextprotocol/clientCapabilities": `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{"experimental":{"x":"` + big + `"}}}`,
	} {
		a := e.send(t, tok, rev2026, "", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+m+`}}`)
		if a.status != http.StatusBadRequest || a.code() != jsonrpc.CodeInvalidParams || !strings.Contains(a.message(), field) {
			t.Fatalf("2026-07-28 call with a big %s: %d %.200s", field, a.status, a.raw)
		}
	}
	// Just under the bound is fine.
	fits := strings.Repeat("x", mcpserve.MaxClientInfoBytes-200)
	client = mcp.NewClient(&mcp.Implementation{Name: fits, Version: "1"}, nil)
	for _, rev := range revisions {
		cs, err := client.Connect(t.Context(), transport, &mcp.ClientSessionOptions{ProtocolVersion: rev})
		if err != nil {
			t.Fatalf("%s: connect with a clientInfo under the bound: %v", rev, err)
		}
		findSkill(t, cs, map[string]any{"name": "search"})
		_ = cs.Close()
	}
}

// TestSessionsPerSubject: one token subject holds at most its share of
// the tenant's sessions; other subjects of the tenant still open theirs,
// up to the tenant's bound; tokens without sub are counted each alone.
func TestSessionsPerSubject(t *testing.T) {
	t.Parallel()
	e := setup(t, envOptions{maxSessions: 5, maxPerSubject: 2})
	tenant := uuid.New()
	leaked := e.tokenOf(t, tenant, "dashboard", "mcp:read", time.Hour)
	again := e.tokenOf(t, tenant, "dashboard", "mcp:read", 2*time.Hour) // the same subject, another token
	e.connect(t, leaked, rev2025)
	e.connect(t, again, rev2025)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tok := range []string{leaked, again} {
		a := e.send(t, tok, "", "", initialize)
		if a.status != http.StatusTooManyRequests || !strings.Contains(a.raw, "subject has 2 MCP sessions") ||
			a.header.Get("Retry-After") == "" {
			t.Fatalf("a third session of the subject: %d %s", a.status, a.raw)
		}
	}
	// Other hosts of the tenant are not locked out.
	host := e.tokenOf(t, tenant, "gateway", "mcp:read", time.Hour)
	e.connect(t, host, rev2025)
	e.connect(t, host, rev2025)
	noSub1 := e.tokenOf(t, tenant, "", "mcp:read", time.Hour)
	noSub2 := e.tokenOf(t, tenant, "", "mcp:read", 2*time.Hour)
	e.connect(t, noSub1, rev2025)
	// The tenant's bound still holds.
	if a := e.send(t, noSub2, "", "", initialize); a.status != http.StatusTooManyRequests ||
		!strings.Contains(a.raw, "tenant has 5 MCP sessions") {
		t.Fatalf("a sixth session of the tenant: %d %s", a.status, a.raw)
	}
	if n := e.mcp.Sessions(tenant); n != 5 {
		t.Fatalf("%d sessions, want 5", n)
	}
	// A subject's stateless calls are not counted.
	cs, _ := e.connect(t, leaked, rev2026)
	findSkill(t, cs, map[string]any{"name": "search"})
}

// TestStreamsEndAtTokenExpiry: a 2026-07-28 listen stream and a
// 2025-11-25 GET stream end when the token that opened them expires, not
// before; a stream of a fresh token is not ended by the old one.
func TestStreamsEndAtTokenExpiry(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"listen", "GET"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tokens := clockwork.NewFakeClockAt(time.Now())
			e := setup(t, envOptions{tokenClock: tokens, keepAlive: time.Hour})
			tenant := uuid.New()
			// Issued at the token clock's time, not the wall clock's: on a
			// loaded machine setup takes seconds, and a token issued that
			// much later would expire after the 10 minutes advanced.
			tok := e.tokenAt(t, tenant, "host", "mcp:read", 10*time.Minute, tokens.Now())
			long := e.tokenAt(t, tenant, "host", "mcp:read", time.Hour, tokens.Now())
			session := e.initialize(t, long)
			open := func(tok string) *http.Response {
				if name == "GET" {
					return e.getStream(t.Context(), t, tok, session)
				}
				r := e.listenTo(t.Context(), t, tok, mcpserve.SkillURI("search"))
				if r.StatusCode != http.StatusOK {
					t.Fatalf("listen: %d", r.StatusCode)
				}
				return r
			}
			resp := open(tok)
			defer resp.Body.Close()
			ended := make(chan struct{})
			go func() { defer close(ended); _, _ = io.Copy(io.Discard, resp.Body) }()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := tokens.BlockUntilContext(ctx, 1); err != nil {
				t.Fatalf("no expiry timer: %v", err)
			}
			tokens.Advance(10*time.Minute - 2*time.Second)
			select {
			case <-ended:
				t.Fatal("the stream ended before its token expired")
			case <-time.After(100 * time.Millisecond):
			}
			tokens.Advance(2 * time.Second)
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the stream outlived its token")
			}
			// A fresh token's stream lives on past the first one's exp.
			fresh := open(long)
			defer fresh.Body.Close()
			if err := tokens.BlockUntilContext(ctx, 1); err != nil {
				t.Fatal(err)
			}
			again := make(chan struct{})
			go func() { defer close(again); _, _ = io.Copy(io.Discard, fresh.Body) }()
			tokens.Advance(time.Minute)
			select {
			case <-again:
				t.Fatal("the fresh token's stream ended early")
			case <-time.After(100 * time.Millisecond):
			}
			tokens.Advance(time.Hour)
			select {
			case <-again:
			case <-time.After(10 * time.Second):
				t.Fatal("the fresh stream outlived its token")
			}
		})
	}
}

// TestStreamKeepAlive: an idle stream of either revision carries an SSE
// comment at least every keepalive interval, and the SDK's clients read
// past them (every test's streams carry them: setup).
func TestStreamKeepAlive(t *testing.T) {
	t.Parallel()
	const every = 80 * time.Millisecond
	e := setup(t, envOptions{keepAlive: every})
	tok := e.token(t, uuid.New(), "mcp:read")
	session := e.initialize(t, tok)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	listen := e.listenTo(ctx, t, tok, mcpserve.SkillURI("search"))
	if listen.StatusCode != http.StatusOK {
		t.Fatalf("listen: %d", listen.StatusCode)
	}
	for name, resp := range map[string]*http.Response{"listen": listen, "GET": e.getStream(ctx, t, tok, session)} {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var at []time.Time
		for len(at) < 4 && sc.Scan() {
			if sc.Text() == ": keepalive" {
				at = append(at, time.Now())
			}
		}
		if len(at) < 4 {
			t.Fatalf("%s: %d keepalives before the stream ended (%v)", name, len(at), sc.Err())
		}
		for i := 1; i < len(at); i++ {
			// Loose: the times are the reader's, and a shared machine
			// under -race may stall it; an interval not kept (mcpd's
			// default of seconds) still shows.
			if gap := at[i].Sub(at[i-1]); gap > 25*every {
				t.Errorf("%s: %v between keepalives, want about %v", name, gap, every)
			}
		}
	}
}

// TestUnknownMethodAndPlainErrors: an unknown method is a JSON-RPC -32601
// error on both revisions; a body that is no JSON-RPC message is -32700;
// params of the wrong type are -32602; no message names a Go type.
func TestUnknownMethodAndPlainErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tok := e.token(t, uuid.New(), "mcp:read")
	session := e.initialize(t, tok)
	check := func(what string, a rpcAnswer, status, code int) {
		t.Helper()
		if a.status != status || a.code() != code || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") &&
			!strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("%s: %d %s %.300s; want %d and a JSON-RPC error %d", what, a.status, a.header.Get("Content-Type"), a.raw, status, code)
		}
		for _, bad := range []string{"Go ", "mcp.", "jsonrpc2.", "*mcp", "interface {}", "map["} {
			if strings.Contains(a.message(), bad) {
				t.Errorf("%s: message %q names Go types", what, a.message())
			}
		}
	}
	a := e.send(t, tok, rev2025, session, `{"jsonrpc":"2.0","id":5,"method":"tools/nope","params":{}}`)
	check("unknown method in a session", a, http.StatusOK, jsonrpc.CodeMethodNotFound)
	if a.msg["id"] != float64(5) || !strings.Contains(a.message(), `"tools/nope"`) {
		t.Errorf("unknown method: %s, want its id and name", a.raw)
	}
	check("unknown method without a session", e.send(t, tok, "", "", `{"jsonrpc":"2.0","id":"x","method":"nope","params":{}}`),
		http.StatusOK, jsonrpc.CodeMethodNotFound)
	check("unknown method, 2026-07-28", e.send(t, tok, rev2026, "", `{"jsonrpc":"2.0","id":1,"method":"nope","params":{`+meta2026+`}}`),
		http.StatusNotFound, jsonrpc.CodeMethodNotFound)
	for _, rev := range []string{rev2025, rev2026} {
		for _, body := range []string{`[1,2]`, `{"jsonrpc":"2.0","id":1,"method":5}`, `{"jsonrpc":"2.0","id":{},"method":"ping"}`} {
			check(rev+" "+body, e.send(t, tok, rev, session, body), http.StatusBadRequest, jsonrpc.CodeParseError)
		}
	}
	check("initialize with capabilities 5", e.send(t, tok, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+
		`{"protocolVersion":"2025-11-25","capabilities":5,"clientInfo":{"name":"t","version":"1"}}}`),
		http.StatusOK, jsonrpc.CodeInvalidParams)
	a = e.send(t, tok, rev2025, session, `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":[1]}}`)
	check("resources/read with a uri of the wrong type", a, http.StatusOK, jsonrpc.CodeInvalidParams)
	if !strings.Contains(a.message(), "uri") {
		t.Errorf("resources/read: %q does not name uri", a.message())
	}
	// A tool's arguments that are no object: a tool error, in plain words.
	a = e.send(t, tok, rev2025, session, `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"find_skill","arguments":"str"}}`)
	res, _ := a.msg["result"].(map[string]any)
	if a.status != http.StatusOK || res == nil || res["isError"] != true || strings.Contains(a.raw, "Go ") ||
		!strings.Contains(a.raw, "must be a JSON object") {
		t.Errorf("find_skill with arguments \"str\": %d %s", a.status, a.raw)
	}
}

// TestInitializeKeepsLittle: an initialize call whose session would keep
// a large _meta, protocolVersion or params is refused with -32602 naming
// the field, and opens no session; one at the bounds opens one.
func TestInitializeKeepsLittle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tenant := uuid.New()
	tok := e.token(t, tenant, "mcp:read")
	huge := strings.Repeat("x", 240_000)
	init := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{` + params + `}}`
	}
	const ok = `"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}`
	for field, body := range map[string]string{
		"params._meta":           init(ok + `,"_meta":{"k":"` + huge + `"}`),
		"params.protocolVersion": init(`"protocolVersion":"` + huge + `","capabilities":{},"clientInfo":{"name":"x","version":"1"}`),
		"params.protocolVersion ": init(`"protocolVersion":"2025-11-25-` + strings.Repeat("9", 40) +
			`","capabilities":{},"clientInfo":{"name":"x","version":"1"}`),
		// Read as the SDK reads: exact keys, trailing text ignored.
		"params.clientInfo": init(`"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"`+
			strings.Repeat("x", mcpserve.MaxClientInfoBytes)+`","version":"1"},"ClientInfo":{}`) + `}`,
		"params ": init(ok + `,"unknown":"` + huge + `"`),
		"params  ": init(ok + `,"_meta":{"k":"` + strings.Repeat("x", mcpserve.MaxMetaBytes-100) + `"},"capabilities":{"experimental":{"k":"` +
			strings.Repeat("x", mcpserve.MaxClientInfoBytes-100) + `"}},"clientInfo":{"name":"` +
			strings.Repeat("x", mcpserve.MaxClientInfoBytes-100) + `","version":"1"},"more":"` + strings.Repeat("x", 2000) + `"`),
	} {
		a := e.send(t, tok, "", "", body)
		if a.status != http.StatusOK || a.code() != jsonrpc.CodeInvalidParams ||
			!strings.HasPrefix(a.message(), strings.TrimSpace(field)+" ") ||
			a.header.Get("Mcp-Session-Id") != "" || a.msg["id"] != float64(1) {
			t.Errorf("initialize with a big %s: %d %q %.200s", field, a.status, a.header.Get("Mcp-Session-Id"), a.raw)
		}
	}
	if n := e.mcp.Sessions(tenant); n != 0 {
		t.Fatalf("%d sessions opened by refused initialize calls", n)
	}
	// At the bounds: a session.
	a := e.send(t, tok, "", "", init(ok+`,"_meta":{"k":"`+strings.Repeat("x", mcpserve.MaxMetaBytes-100)+`"}`))
	if a.status != http.StatusOK || a.code() != 0 || a.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize within the bounds: %d %.200s", a.status, a.raw)
	}
	// 2026-07-28: a call's _meta is not kept, and is bounded by the body.
	a = e.send(t, tok, rev2026, "", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+
		strings.TrimSuffix(meta2026, "}")+`,"k":"`+strings.Repeat("x", 100_000)+`"}}}`)
	if a.status != http.StatusOK || a.code() != 0 {
		t.Fatalf("2026-07-28 call with a 100 KB _meta: %d %.200s", a.status, a.raw)
	}
}

// TestRPCErrorShapes: a batch is a JSON-RPC error as JSON; an initialize
// the SDK refuses names no session; the 429 of the session cap carries
// the call's id.
func TestRPCErrorShapes(t *testing.T) {
	t.Parallel()
	e := setup(t, envOptions{maxSessions: 1})
	tenant := uuid.New()
	tok := e.token(t, tenant, "mcp:read")
	initialize := `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, rev := range []string{"", rev2025, rev2026} {
		a := e.send(t, tok, rev, "", `[`+initialize+`]`)
		if a.status != http.StatusBadRequest || a.code() != jsonrpc.CodeInvalidRequest ||
			!strings.HasPrefix(a.header.Get("Content-Type"), "application/json") || a.header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%q: a batch: %d %s %.200s", rev, a.status, a.header.Get("Content-Type"), a.raw)
		}
	}
	a := e.send(t, tok, "", "", `{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":5,"clientInfo":{"name":"t","version":"1"}}}`)
	if a.code() != jsonrpc.CodeInvalidParams || a.header.Get("Mcp-Session-Id") != "" {
		t.Errorf("initialize refused by the SDK: %d %q %.200s", a.status, a.header.Get("Mcp-Session-Id"), a.raw)
	}
	if n := e.mcp.Sessions(tenant); n != 0 {
		t.Fatalf("%d sessions after refusals", n)
	}
	e.initialize(t, tok)
	a = e.send(t, tok, "", "", initialize)
	if a.status != http.StatusTooManyRequests || a.msg["id"] != float64(7) || a.code() == 0 {
		t.Errorf("initialize at the cap: %d %.200s", a.status, a.raw)
	}
}
