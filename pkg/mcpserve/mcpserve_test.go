package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/limit"
	"github.com/cyberos/mcpd/pkg/mcpserve"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// findSkill calls find_skill and decodes its structured content.
func findSkill(t *testing.T, cs *mcp.ClientSession, args map[string]any) mcpserve.Providers {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserve.ToolFindSkill, Arguments: args})
	if err != nil {
		t.Fatalf("find_skill: %v", err)
	}
	if res.IsError {
		t.Fatalf("find_skill: tool error %v", res.Content)
	}
	var p mcpserve.Providers
	decodeStructured(t, res, &p)
	if len(res.Content) != 1 {
		t.Fatalf("find_skill: %d content items, want one text", len(res.Content))
	}
	if _, ok := res.Content[0].(*mcp.TextContent); !ok {
		t.Fatalf("find_skill: content %T, want text", res.Content[0])
	}
	return p
}

func decodeStructured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

func readJSON(t *testing.T, cs *mcp.ClientSession, uri string, v any) {
	t.Helper()
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
		t.Fatalf("read %s: %+v", uri, res.Contents)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), v); err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
}

func TestToolsBothRevisions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tenant := uuid.New()
	a := e.register(t, tenant, "search-a", "search", "fetch")
	b := e.register(t, tenant, "search-b", "search")
	c := e.register(t, tenant, "search-c", "search")
	// search-a and search-c stay; search-b goes silent and dies; search-c
	// misses two beats and is degraded.
	e.clock.Advance(testInterval)
	e.heartbeat(t, tenant, a.ServerID)
	e.clock.Advance(testInterval)
	e.heartbeat(t, tenant, a.ServerID)
	e.heartbeat(t, tenant, c.ServerID)
	e.sweep(t, 2*testInterval+time.Second)
	e.heartbeat(t, tenant, a.ServerID)
	for _, id := range []uuid.UUID{a.ServerID, b.ServerID, c.ServerID} {
		srv, err := e.reg.Server(t.Context(), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", srv.ModuleName, srv.Status)
	}
	tok := e.token(t, tenant, "mcp:read")

	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			cs, _ := e.connect(t, tok, rev)
			init := cs.InitializeResult()
			if init.ServerInfo == nil || init.ServerInfo.Name != "mcpd" || init.ServerInfo.Version != "1.2.3-test" {
				t.Fatalf("server info %+v", init.ServerInfo)
			}
			if init.Capabilities.Resources == nil || !init.Capabilities.Resources.Subscribe || !init.Capabilities.Resources.ListChanged {
				t.Fatalf("resource capabilities %+v", init.Capabilities.Resources)
			}

			tools, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools.Tools) != 3 {
				t.Fatalf("%d tools", len(tools.Tools))
			}
			for _, tool := range tools.Tools {
				if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.InputSchema == nil || tool.OutputSchema == nil {
					t.Fatalf("tool %s: annotations %+v, schemas %v %v", tool.Name, tool.Annotations,
						tool.InputSchema != nil, tool.OutputSchema != nil)
				}
			}

			p := findSkill(t, cs, map[string]any{"name": "search"})
			if got := providerModules(p); !sameStrings(got, []string{"search-a", "search-c"}) {
				t.Fatalf("find_skill(search): %v, want the live ones healthy first", got)
			}
			if p.Providers[0].Status != "healthy" || p.Providers[1].Status != "degraded" ||
				p.Providers[0].ServerID != a.ServerID.String() || p.Providers[0].Version != "1.0.0" ||
				len(p.Providers[0].SupportedProtocols) != 1 || !hasRemote(p.Providers[0]) || !hasRemote(p.Providers[1]) {
				t.Fatalf("providers %+v", p.Providers)
			}
			if p := findSkill(t, cs, map[string]any{"name": "nobody"}); len(p.Providers) != 0 || p.Skill != "nobody" {
				t.Fatalf("find_skill(nobody): %+v", p)
			}
			if p := findSkill(t, cs, map[string]any{"name": "search", "protocol": "2024-11-05"}); len(p.Providers) != 0 {
				t.Fatalf("find_skill(search, 2024-11-05): %+v", p)
			}

			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserve.ToolListServers})
			if err != nil || res.IsError {
				t.Fatalf("list_servers: %v %v", err, res)
			}
			var list mcpserve.ServerList
			decodeStructured(t, res, &list)
			if len(list.Servers) != 3 || list.Truncated {
				t.Fatalf("list_servers: %+v", list)
			}
			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserve.ToolListServers,
				Arguments: map[string]any{"status": "unhealthy"}})
			if err != nil || res.IsError {
				t.Fatalf("list_servers(unhealthy): %v %v", err, res)
			}
			decodeStructured(t, res, &list)
			if len(list.Servers) != 1 || list.Servers[0].ModuleName != "search-b" {
				t.Fatalf("list_servers(unhealthy): %+v", list)
			}

			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserve.ToolGetServer,
				Arguments: map[string]any{"module_name": "search-a"}})
			if err != nil || res.IsError {
				t.Fatalf("get_server: %v %v", err, res)
			}
			var d mcpserve.ServerDetail
			decodeStructured(t, res, &d)
			if d.Server.ServerID != a.ServerID.String() || len(d.Skills) != 2 || len(d.Server.Remotes) != 1 {
				t.Fatalf("get_server: %+v", d)
			}
			for _, args := range []map[string]any{
				{"server_id": uuid.NewString()}, {"module_name": "nope"}, {"server_id": "x"}, {},
			} {
				res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserve.ToolGetServer, Arguments: args})
				if err != nil {
					t.Fatalf("get_server(%v): protocol error %v, want a tool error", args, err)
				}
				if !res.IsError {
					t.Fatalf("get_server(%v): not a tool error", args)
				}
			}

			templates, err := cs.ListResourceTemplates(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var uris []string
			for _, tpl := range templates.ResourceTemplates {
				uris = append(uris, tpl.URITemplate)
			}
			if !sameStrings(uris, []string{"mcpd://servers/{module_name}", "mcpd://skills/{name}"}) {
				t.Fatalf("templates %v", uris)
			}
			resources, err := cs.ListResources(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			uris = uris[:0]
			for _, r := range resources.Resources {
				uris = append(uris, r.URI)
			}
			if !sameStrings(uris, []string{"mcpd://skills/fetch", "mcpd://skills/search"}) {
				t.Fatalf("resources %v", uris)
			}
			var fromResource mcpserve.Providers
			readJSON(t, cs, mcpserve.SkillURI("search"), &fromResource)
			if !sameStrings(providerModules(fromResource), []string{"search-a", "search-c"}) {
				t.Fatalf("read skill: %+v", fromResource)
			}
			readJSON(t, cs, mcpserve.ServerURI("search-b"), &d)
			if d.Server.Status != "unhealthy" {
				t.Fatalf("read server: %+v", d)
			}
			if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: mcpserve.ServerURI("nope")}); err == nil {
				t.Fatal("read of an unknown server: no error")
			}
		})
	}
}

// TestNotifyDeathAndRecovery is the "done when": a subscriber of
// mcpd://skills/search is told of its provider's death and of its
// recovery, on both revisions, and each read after a notification is
// current.
func TestNotifyDeathAndRecovery(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			notifyDeathAndRecovery(t, setup(t), rev)
		})
	}
}

func notifyDeathAndRecovery(t *testing.T, e *env, rev string) {
	tenant := uuid.New()
	srv := e.register(t, tenant, "search-a", "search")
	cs, rec := e.connect(t, e.token(t, tenant, "mcp:read"), rev)
	if p := findSkill(t, cs, map[string]any{"name": "search"}); len(p.Providers) != 1 || !hasRemote(p.Providers[0]) {
		t.Fatalf("find_skill: %+v", p)
	}
	uri := mcpserve.SkillURI("search")
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the subscription", func() bool { return e.mcp.Subscribed(tenant) >= 1 })

	// A heartbeat that changes nothing tells no one.
	e.clock.Advance(testInterval)
	e.heartbeat(t, tenant, srv.ServerID)

	// Death: three missed beats.
	evs := e.sweep(t, 3*testInterval)
	if len(evs) != 1 || evs[0].Kind != registry.KindUnhealthy {
		t.Fatalf("sweep: %+v", evs)
	}
	died := time.Now()
	testwait.Eventually(t, "the update after the death", func() bool { return rec.updates(uri) >= 1 })
	t.Logf("%s: notified %v after the unhealthy sweep committed", rev, time.Since(died).Round(time.Millisecond))
	if p := findSkill(t, cs, map[string]any{"name": "search"}); len(p.Providers) != 0 {
		t.Fatalf("find_skill after the death: %+v", p)
	}

	// Recovery within the same second: held back until the second passed.
	// The coalescer takes the event on its own goroutine, so it may read
	// the fake clock before a single Advance and set its timer after it
	// (the timer would then never fire): the clock moves on in small steps
	// until the held-back update goes out.
	e.heartbeat(t, tenant, srv.ServerID)
	testwait.Eventually(t, "the update after the recovery", func() bool {
		if rec.updates(uri) >= 2 {
			return true
		}
		e.clock.Advance(100 * time.Millisecond)
		return false
	})
	var p mcpserve.Providers
	readJSON(t, cs, uri, &p)
	if len(p.Providers) != 1 || p.Providers[0].Status != "healthy" {
		t.Fatalf("read after the recovery: %+v", p)
	}
	if n := rec.updates(uri); n != 2 {
		t.Fatalf("%d updates, want 2 (death, recovery)", n)
	}
}

func TestListChanged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tenant := uuid.New()
	e.register(t, tenant, "search-a", "search")
	tok := e.token(t, tenant, "mcp:read")
	_, rec2025 := e.connect(t, tok, rev2025)
	_, rec2026 := e.connect(t, tok, rev2026)
	// The 2026-07-28 client opens its subscriptions/listen in the
	// background: each poll offers a new skill name until it is told.
	i := 0
	testwait.Eventually(t, "list_changed on both revisions", func() bool {
		i++
		e.register(t, tenant, fmt.Sprintf("fetcher-%d", i), fmt.Sprintf("fetch-%d", i))
		return rec2025.lists() >= 1 && rec2026.lists() >= 1
	})
}

func TestIsolation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tenantA, tenantB := uuid.New(), uuid.New()
	e.register(t, tenantA, "search-a", "search")
	e.register(t, tenantB, "other", "other")
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			cs, rec := e.connect(t, e.token(t, tenantB, "mcp:read"), rev)
			if p := findSkill(t, cs, map[string]any{"name": "search"}); len(p.Providers) != 0 {
				t.Fatalf("tenant B sees tenant A's providers: %+v", p)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserve.ToolGetServer,
				Arguments: map[string]any{"module_name": "search-a"}})
			if err != nil || !res.IsError {
				t.Fatalf("get_server of tenant A's server: %v %+v", err, res)
			}
			uri := mcpserve.SkillURI("search")
			before := e.mcp.Subscribed(tenantB)
			if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatal(err)
			}
			testwait.Eventually(t, "B's subscription", func() bool { return e.mcp.Subscribed(tenantB) > before })
			// A subscriber of tenant A on the same resource is told; B is not.
			csA, recA := e.connect(t, e.token(t, tenantA, "mcp:read"), rev)
			before = e.mcp.Subscribed(tenantA)
			if err := csA.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatal(err)
			}
			testwait.Eventually(t, "A's subscription", func() bool { return e.mcp.Subscribed(tenantA) > before })
			// A re-registration, an event of tenant A, a second after the
			// last notification of the resource.
			e.clock.Advance(time.Second)
			e.register(t, tenantA, "search-a", "search")
			testwait.Eventually(t, "A's update", func() bool { return recA.updates(uri) >= 1 })
			if got := rec.updates(uri); got != 0 {
				t.Fatalf("tenant B was told %d times of tenant A's change", got)
			}
		})
	}
	t.Run("session", func(t *testing.T) {
		// A 2025-11-25 session of tenant A is unknown to tenant B.
		cs, _ := e.connect(t, e.token(t, tenantA, "mcp:read"), rev2025)
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.token(t, tenantB, "mcp:read"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", rev2025)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("tenant B with tenant A's session: %d %s, want 404", resp.StatusCode, b)
		}
	})
}

func TestUnauthorized(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, rev := range revisions {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", rev)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s without a token: %d %q", rev, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		if _, _, err := e.tryConnect(t, "", rev); err == nil {
			t.Fatalf("%s: the client connected without a token", rev)
		}
		if _, _, err := e.tryConnect(t, "not-a-token", rev); err == nil {
			t.Fatalf("%s: the client connected with a bad token", rev)
		}
	}
	// A token without the read scope: 403.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+e.token(t, uuid.New(), "other:scope"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("without the scope: %d", resp.StatusCode)
	}
}

// post sends one JSON-RPC message to /mcp and returns the status and the
// result of the answer (JSON or one SSE event).
func (e *env) post(t *testing.T, token, rev, method, params string) (int, map[string]any) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", rev)
	req.Header.Set("Mcp-Method", method)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if i := strings.Index(string(b), "data: "); i >= 0 {
		b = []byte(strings.SplitN(string(b[i+len("data: "):]), "\n", 2)[0])
	}
	var msg map[string]any
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, msg
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tok := e.token(t, uuid.New(), "mcp:read")
	meta := `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}`
	code, msg := e.post(t, tok, rev2026, "server/discover", meta)
	res, _ := msg["result"].(map[string]any)
	if code != http.StatusOK || res == nil {
		t.Fatalf("server/discover: %d %v", code, msg)
	}
	b, _ := json.Marshal(res)
	t.Logf("server/discover: %s", b)
	versions, _ := res["supportedVersions"].([]any)
	if len(versions) == 0 || versions[0] != rev2026 {
		t.Errorf("supportedVersions %v", res["supportedVersions"])
	}
	caps, _ := res["capabilities"].(map[string]any)
	if caps["tools"] == nil || caps["resources"] == nil {
		t.Errorf("capabilities %v", caps)
	}
	rm, _ := res["_meta"].(map[string]any)
	info, _ := rm["io.modelcontextprotocol/serverInfo"].(map[string]any)
	if info["name"] != "mcpd" || info["version"] != "1.2.3-test" {
		t.Errorf("serverInfo %v", rm)
	}
	if res["cacheScope"] != "private" || res["ttlMs"] != float64(3600000) {
		t.Errorf("discover cache hints: ttlMs %v, cacheScope %v", res["ttlMs"], res["cacheScope"])
	}
	// List results carry their cache hints too.
	for method, ttl := range map[string]float64{"tools/list": 3600000, "resources/templates/list": 3600000, "resources/list": 0} {
		_, msg := e.post(t, tok, rev2026, method, meta)
		res, _ := msg["result"].(map[string]any)
		if res["cacheScope"] != "private" || res["ttlMs"] != ttl {
			t.Errorf("%s: ttlMs %v, cacheScope %v; want %v, private", method, res["ttlMs"], res["cacheScope"], ttl)
		}
	}
}

// listen opens a 2026-07-28 subscriptions/listen stream; the caller closes
// the answer's body.
func (e *env) listen(ctx context.Context, t *testing.T, token, uri string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},` +
		`"notifications":{"resourceSubscriptions":["` + uri + `"]}}}`
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

// TestStreamLimit: open streams count against the tenant's watch limit;
// other calls do not.
func TestStreamLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, envOptions{limits: limit.New(limit.Options{MaxWatches: 1})})
	tok := e.token(t, uuid.New(), "mcp:read")
	ctx, cancel := context.WithCancel(t.Context())
	first := e.listen(ctx, t, tok, mcpserve.SkillURI("search"))
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %d", first.StatusCode)
	}
	second := e.listen(t.Context(), t, tok, mcpserve.SkillURI("search"))
	second.Body.Close()
	if second.StatusCode != http.StatusTooManyRequests ||
		second.Header.Get("Content-Type") != "application/problem+json" || second.Header.Get("Retry-After") == "" {
		t.Fatalf("second stream: %d %v, want the API's 429 problem", second.StatusCode, second.Header)
	}
	if code, _ := e.post(t, tok, rev2026, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
		`"io.modelcontextprotocol/clientCapabilities":{}}}`); code != http.StatusOK {
		t.Fatalf("a call beside the stream: %d", code)
	}
	cancel()
	first.Body.Close()
	testwait.Eventually(t, "a stream once the first closed", func() bool {
		r := e.listen(t.Context(), t, tok, mcpserve.SkillURI("search"))
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
}

// TestSessionLimit: a tenant opens at most MaxSessions 2025-11-25 sessions
// in one mcpd; past them initialize is a 429 with Retry-After, while the
// tenant's sessions, its stateless calls and other tenants go on.
func TestSessionLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, envOptions{maxSessions: 2})
	tenant := uuid.New()
	tok := e.token(t, tenant, "mcp:read")
	first, _ := e.connect(t, tok, rev2025)
	second, _ := e.connect(t, tok, rev2025)
	if _, _, err := e.tryConnect(t, tok, rev2025); err == nil {
		t.Fatal("a third session opened past the limit of two")
	}
	initialize := `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`
	code, msg := e.post(t, tok, rev2025, "initialize", initialize)
	rpcErr, _ := msg["error"].(map[string]any)
	if code != http.StatusTooManyRequests || rpcErr == nil || !strings.Contains(fmt.Sprint(rpcErr["message"]), "2 MCP sessions") {
		t.Fatalf("initialize past the limit: %d %v, want 429 naming the limit", code, msg)
	}
	// What is open goes on, and so do calls that need no session; their
	// streams count against the watch-stream limit, not this one.
	findSkill(t, first, map[string]any{"name": "search"})
	findSkill(t, second, map[string]any{"name": "search"})
	stateless, _ := e.connect(t, tok, rev2026)
	findSkill(t, stateless, map[string]any{"name": "search"})
	if n := e.mcp.Sessions(tenant); n != 2 {
		t.Fatalf("%d sessions counted beside a stateless client, want 2", n)
	}
	// Another tenant has its own.
	other := e.token(t, uuid.New(), "mcp:read")
	e.connect(t, other, rev2025)
	// A session that ends makes room.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "a session once one closed", func() bool {
		code, _ := e.post(t, tok, rev2025, "initialize", initialize)
		return code == http.StatusOK
	})
}

// TestTenantEvicted: a tenant's MCP server and follower go once it has no
// session and no call in flight.
func TestTenantEvicted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tok := e.token(t, uuid.New(), "mcp:read")
	cs, _ := e.connect(t, tok, rev2025)
	findSkill(t, cs, map[string]any{"name": "search"})
	if n := e.mcp.Tenants(); n != 1 {
		t.Fatalf("%d tenants with a session", n)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the tenant evicted", func() bool { return e.mcp.Tenants() == 0 })
	// It comes back at the next call, current.
	cs, _ = e.connect(t, tok, rev2026)
	findSkill(t, cs, map[string]any{"name": "search"})
}

// TestShutdownEndsStreams: the Streams context ends every open stream.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	streams, stop := context.WithCancel(context.Background())
	defer stop()
	e := setup(t, envOptions{streams: streams})
	tok := e.token(t, uuid.New(), "mcp:read")
	resp := e.listen(t.Context(), t, tok, mcpserve.SkillURI("search"))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listen: %d", resp.StatusCode)
	}
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); done <- err }()
	stop()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end at shutdown")
	}
}
