package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Types written from the official OpenAPI ("MCP Server Registry API"
// 2025-12-01: ServerList, ServerResponse, ServerDetail, RemoteTransport),
// decoded strictly: mcpd's answers hold nothing the OpenAPI does not name,
// except inside _meta, which it leaves open.
type (
	oaServerList struct {
		Servers  []oaServerResponse `json:"servers"`
		Metadata struct {
			NextCursor *string `json:"nextCursor"`
			Count      int     `json:"count"`
		} `json:"metadata"`
	}
	oaServerResponse struct {
		Server oaServerDetail             `json:"server"`
		Meta   map[string]json.RawMessage `json:"_meta"`
	}
	oaServerDetail struct {
		Schema      string              `json:"$schema"`
		Name        string              `json:"name"`
		Description string              `json:"description"`
		Title       *string             `json:"title"`
		Version     string              `json:"version"`
		WebsiteURL  *string             `json:"websiteUrl"`
		Repository  json.RawMessage     `json:"repository"`
		Icons       []json.RawMessage   `json:"icons"`
		Packages    []json.RawMessage   `json:"packages"`
		Remotes     []oaRemoteTransport `json:"remotes"`
		Meta        json.RawMessage     `json:"_meta"`
	}
	oaRemoteTransport struct {
		Type      string            `json:"type"`
		URL       string            `json:"url"`
		Headers   []json.RawMessage `json:"headers"`
		Variables json.RawMessage   `json:"variables"`
	}
	// oaHealth is mcpd's block of _meta, as the contract gives it.
	oaHealth struct {
		ServerID           string    `json:"serverId"`
		Status             string    `json:"status"`
		LastHeartbeatAt    time.Time `json:"lastHeartbeatAt"`
		StatusChangedAt    time.Time `json:"statusChangedAt"`
		RegisteredAt       time.Time `json:"registeredAt"`
		SupportedProtocols []string  `json:"supportedProtocols"`
		Skills             []struct {
			Name      string `json:"name"`
			Available bool   `json:"available"`
		} `json:"skills"`
	}
	// oaOfficial is the registry-set block of the official OpenAPI
	// (ServerResponse._meta["io.modelcontextprotocol.registry/official"],
	// additionalProperties false).
	oaOfficial struct {
		Status          string     `json:"status"`
		StatusMessage   *string    `json:"statusMessage"`
		StatusChangedAt *time.Time `json:"statusChangedAt"`
		PublishedAt     time.Time  `json:"publishedAt"`
		UpdatedAt       time.Time  `json:"updatedAt"`
		IsLatest        *bool      `json:"isLatest"`
	}
	oaError struct {
		Error string `json:"error"`
	}
)

func strictDecode[T any](t *testing.T, resp response) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(resp.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T from %d %s: %v", v, resp.code, resp.body, err)
	}
	return v
}

func (r oaServerResponse) health(t *testing.T) oaHealth {
	t.Helper()
	raw, ok := r.Meta["io.cyberos.mcpd/health"]
	if _, official := r.Meta["io.modelcontextprotocol.registry/official"]; !ok || !official || len(r.Meta) != 2 {
		t.Fatalf("_meta of %s: %v, want the official block and io.cyberos.mcpd/health", r.Server.Name, r.Meta)
	}
	var h oaHealth
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		t.Fatalf("health of %s: %v", r.Server.Name, err)
	}
	return h
}

func (r oaServerResponse) official(t *testing.T) oaOfficial {
	t.Helper()
	var o oaOfficial
	dec := json.NewDecoder(bytes.NewReader(r.Meta["io.modelcontextprotocol.registry/official"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("official block of %s: %v", r.Server.Name, err)
	}
	return o
}

func (b *bundle) registryList(t *testing.T, query string) oaServerList {
	t.Helper()
	resp := b.get(t, "/v0.1/servers"+query)
	if resp.code != http.StatusOK {
		t.Fatalf("GET /v0.1/servers%s: %d %s", query, resp.code, resp.body)
	}
	list := strictDecode[oaServerList](t, resp)
	if list.Metadata.Count != len(list.Servers) {
		t.Fatalf("count %d for %d servers", list.Metadata.Count, len(list.Servers))
	}
	return list
}

func names(list oaServerList) []string {
	out := []string{}
	for _, s := range list.Servers {
		out = append(out, s.Server.Name)
	}
	return out
}

func (b *bundle) sweep(t *testing.T, d time.Duration) {
	t.Helper()
	b.clock.Advance(d)
	if _, err := b.monitor.Sweep(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
}

func TestRegistryServerShape(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"module_name":"calendar","version":"1.3.2","supported_protocols":["2025-06-18","2025-11-25"],
		"skills":[{"name":"search"},{"name":"book"}],
		"remotes":[{"type":"streamable-http","url":"https://cal.example/mcp"}],"description":"The calendar","title":"Calendar"}`
	srv := decode[registry.Server](t, b.post(t, registerPath, body))
	b.register(t, "mail")
	list := b.registryList(t, "")
	if got := names(list); !slices.Equal(got, []string{"local.mcpd/calendar", "local.mcpd/mail"}) {
		t.Fatalf("names %v", got)
	}
	if list.Metadata.NextCursor != nil {
		t.Fatalf("nextCursor %q on the last page", *list.Metadata.NextCursor)
	}
	cal := list.Servers[0]
	want := oaServerDetail{Schema: "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
		Name: "local.mcpd/calendar", Description: "The calendar", Version: "1.3.2",
		Remotes: []oaRemoteTransport{{Type: "streamable-http", URL: "https://cal.example/mcp"}}}
	if cal.Server.Title == nil || *cal.Server.Title != "Calendar" {
		t.Fatalf("title %v", cal.Server.Title)
	}
	cal.Server.Title = nil
	if got, _ := json.Marshal(cal.Server); string(got) != string(must(json.Marshal(want))) {
		t.Fatalf("server\n got  %s\n want %s", got, must(json.Marshal(want)))
	}
	h := cal.health(t)
	now := b.clock.Now()
	if h.ServerID != srv.ServerID.String() || h.Status != "healthy" || !h.LastHeartbeatAt.Equal(now) ||
		!h.StatusChangedAt.Equal(now) || !h.RegisteredAt.Equal(now) ||
		!slices.Equal(h.SupportedProtocols, []string{"2025-06-18", "2025-11-25"}) || len(h.Skills) != 2 ||
		h.Skills[0].Name != "book" || !h.Skills[0].Available || h.Skills[1].Name != "search" {
		t.Fatalf("health %+v", h)
	}
	mail := list.Servers[1]
	if mail.Server.Description != "MCP server mail" || mail.Server.Title != nil || mail.Server.Remotes == nil || len(mail.Server.Remotes) != 0 {
		t.Fatalf("mail %+v", mail.Server)
	}
	if !strings.Contains(string(b.get(t, "/v0.1/servers").body), `"remotes":[]`) {
		t.Fatalf("no remotes: want \"remotes\":[]")
	}
	if ct := b.get(t, "/v0.1/servers").header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// By default the list holds what is reachable now: a server that dies
// leaves it within the unhealthy time, and an updated_since poll shows it
// whatever its status; include_deleted lists every status.
func TestRegistryLiveness(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dying := b.register(t, "dying", "search")
	b.register(t, "steady")
	b.register(t, "gone")
	goneID := decode[registry.Server](t, b.post(t, registerPath, registerBody("gone"))).ServerID
	b.post(t, "/v1/mcp/servers/deregister", `{"server_id":"`+goneID.String()+`"}`)
	start := b.clock.Now()

	steady := func() {
		resp := b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+decode[registry.Server](t, b.post(t, registerPath, registerBody("steady"))).ServerID.String()+`"}`)
		if resp.code != http.StatusOK {
			t.Fatalf("heartbeat: %d", resp.code)
		}
	}
	if got := names(b.registryList(t, "")); !slices.Equal(got, []string{"local.mcpd/dying", "local.mcpd/steady"}) {
		t.Fatalf("default list %v", got)
	}
	b.clock.Advance(time.Second)
	since := b.clock.Now().UTC().Format(time.RFC3339Nano)
	b.sweep(t, 19*time.Second) // dying: 20s, degraded: still listed
	steady()
	if got := names(b.registryList(t, "")); !slices.Equal(got, []string{"local.mcpd/dying", "local.mcpd/steady"}) {
		t.Fatalf("with a degraded server %v", got)
	}
	b.sweep(t, 10*time.Second) // dying: 30s, unhealthy
	if got := names(b.registryList(t, "")); !slices.Equal(got, []string{"local.mcpd/steady"}) {
		t.Fatalf("after the death: %v", got)
	}
	// The follower polls with updated_since: the death shows, and the
	// re-registered steady (a registration is a change).
	list := b.registryList(t, "?updated_since="+url.QueryEscape(since))
	if got := names(list); !slices.Equal(got, []string{"local.mcpd/dying", "local.mcpd/steady"}) {
		t.Fatalf("updated_since %s: %v", since, got)
	}
	h := list.Servers[0].health(t)
	if h.Status != "unhealthy" || h.ServerID != dying.ServerID.String() || !h.StatusChangedAt.Equal(b.clock.Now()) ||
		h.Skills[0].Available {
		t.Fatalf("dead server's health %+v", h)
	}
	if got := names(b.registryList(t, "?updated_since="+url.QueryEscape(b.clock.Now().Add(time.Microsecond).Format(time.RFC3339Nano)))); len(got) != 0 {
		t.Fatalf("updated_since after everything: %v", got)
	}
	all := names(b.registryList(t, "?include_deleted=true"))
	if !slices.Equal(all, []string{"local.mcpd/dying", "local.mcpd/gone", "local.mcpd/steady"}) {
		t.Fatalf("include_deleted %v", all)
	}
	if got := names(b.registryList(t, "?include_deleted=false")); !slices.Equal(got, []string{"local.mcpd/steady"}) {
		t.Fatalf("include_deleted=false %v", got)
	}
	_ = start
}

// Every ServerResponse carries the official registry-set block: active
// while registered (healthy, degraded or unhealthy), deleted once
// deregistered; publishedAt the first registration, updatedAt the last
// change (a heartbeat is none), isLatest true.
func TestRegistryOfficialMeta(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.clock.Now()
	cal := b.register(t, "calendar")
	b.register(t, "gone")
	b.clock.Advance(time.Second)
	goneID := decode[registry.Server](t, b.post(t, registerPath, registerBody("gone"))).ServerID
	b.clock.Advance(time.Second)
	deregAt := b.clock.Now()
	b.post(t, "/v1/mcp/servers/deregister", `{"server_id":"`+goneID.String()+`"}`)
	b.clock.Advance(time.Second)
	b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+cal.ServerID.String()+`"}`)

	list := b.registryList(t, "?include_deleted=true")
	if got := names(list); !slices.Equal(got, []string{"local.mcpd/calendar", "local.mcpd/gone"}) {
		t.Fatalf("names %v", got)
	}
	o := list.Servers[0].official(t)
	if o.Status != "active" || !o.PublishedAt.Equal(first) || !o.UpdatedAt.Equal(first) ||
		o.IsLatest == nil || !*o.IsLatest || o.StatusMessage != nil {
		t.Fatalf("calendar's official block %+v", o)
	}
	o = list.Servers[1].official(t)
	if o.Status != "deleted" || !o.PublishedAt.Equal(first) || !o.UpdatedAt.Equal(deregAt) || o.IsLatest == nil || !*o.IsLatest {
		t.Fatalf("gone's official block %+v", o)
	}
	// Unhealthy is still active in the official sense: liveness is
	// mcpd's own block.
	b.sweep(t, 40*time.Second)
	one := strictDecode[oaServerResponse](t, b.get(t, "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest?include_deleted=true"))
	if o := one.official(t); o.Status != "active" || !o.UpdatedAt.Equal(b.clock.Now()) {
		t.Fatalf("unhealthy calendar's official block %+v", o)
	}
	if h := one.health(t); h.Status != "unhealthy" {
		t.Fatalf("health %+v", h)
	}
}

func TestRegistryQuery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, m := range []string{"alpha", "beta", "gamma", "delta", "epsilon"} {
		b.register(t, m)
	}
	b.post(t, registerPath, `{"module_name":"zeta","version":"2.0.0","supported_protocols":["2025-06-18"]}`)

	// Pages of 2, following nextCursor.
	var got []string
	query := "?limit=2"
	for range 10 {
		list := b.registryList(t, query)
		got = append(got, names(list)...)
		if list.Metadata.NextCursor == nil {
			break
		}
		if len(list.Servers) != 2 {
			t.Fatalf("a page of %d before the last", len(list.Servers))
		}
		query = "?limit=2&cursor=" + url.QueryEscape(*list.Metadata.NextCursor)
	}
	want := []string{"alpha", "beta", "delta", "epsilon", "gamma", "zeta"}
	for i := range want {
		want[i] = "local.mcpd/" + want[i]
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	if n := len(b.registryList(t, "").Servers); n != 6 {
		t.Fatalf("default limit: %d", n)
	}
	for q, want := range map[string][]string{
		"?search=ta":                  {"local.mcpd/beta", "local.mcpd/delta", "local.mcpd/zeta"},
		"?search=LOCAL.MCPD%2FALP":    {"local.mcpd/alpha"},
		"?search=nothing":             {},
		"?version=2.0.0":              {"local.mcpd/zeta"},
		"?version=latest&search=zeta": {"local.mcpd/zeta"},
		"?version=9.9.9":              {},
	} {
		if got := names(b.registryList(t, q)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
}

func TestRegistryBadQuery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "alpha")
	b.register(t, "beta")
	// A cursor of the same list for another tenant is refused.
	otherTok := b.issue(t, uuid.New(), "mcp:read mcp:write")
	for _, m := range []string{"alpha", "beta"} {
		b.do(t, req{method: http.MethodPost, path: registerPath, body: registerBody(m), token: otherTok})
	}
	resp := b.do(t, req{path: "/v0.1/servers?limit=1", token: otherTok})
	otherCursor := *strictDecode[oaServerList](t, resp).Metadata.NextCursor
	for _, q := range []string{
		"?limit=0", "?limit=101", "?limit=abc", "?limit=-1", "?limit=1.5",
		"?updated_since=yesterday", "?updated_since=2025-13-01T00:00:00Z", "?updated_since=2025-08-07",
		"?cursor=garbage", "?cursor=" + url.QueryEscape(otherCursor),
		"?include_deleted=yes", "?limit=1&limit=2", "?search=" + strings.Repeat("x", 257),
	} {
		resp := b.get(t, "/v0.1/servers"+q)
		if resp.code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, resp.code, resp.body)
			continue
		}
		if e := strictDecode[oaError](t, resp); e.Error == "" {
			t.Errorf("%s: empty error", q)
		}
	}
	if resp := b.get(t, "/v0.1/servers?limit=100"); resp.code != http.StatusOK {
		t.Fatalf("limit=100: %d", resp.code)
	}
}

func TestRegistryVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar", "search")
	b.register(t, "mail")
	for _, path := range []string{
		"/v0.1/servers/local.mcpd%2Fcalendar/versions",
	} {
		list := strictDecode[oaServerList](t, b.get(t, path))
		if got := names(list); !slices.Equal(got, []string{"local.mcpd/calendar"}) || list.Metadata.Count != 1 {
			t.Fatalf("%s: %v", path, got)
		}
	}
	for _, path := range []string{
		"/v0.1/servers/local.mcpd%2Fcalendar/versions/latest",
		"/v0.1/servers/local.mcpd%2Fcalendar/versions/1.3.2",
	} {
		resp := b.get(t, path)
		if resp.code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.code, resp.body)
		}
		one := strictDecode[oaServerResponse](t, resp)
		if one.Server.Name != "local.mcpd/calendar" || one.health(t).ServerID != srv.ServerID.String() {
			t.Fatalf("%s: %+v", path, one)
		}
	}
	for _, path := range []string{
		"/v0.1/servers/local.mcpd%2Fcalendar/versions/1.3.3",
		"/v0.1/servers/local.mcpd%2Fnothing/versions",
		"/v0.1/servers/local.mcpd%2Fnothing/versions/latest",
		"/v0.1/servers/other.ns%2Fcalendar/versions/latest",
		"/v0.1/servers/calendar/versions/latest",
		"/v0.1/servers/local.mcpd%2FCalendar/versions",
	} {
		resp := b.get(t, path)
		if resp.code != http.StatusNotFound {
			t.Fatalf("%s: %d %s, want 404", path, resp.code, resp.body)
		}
		if e := strictDecode[oaError](t, resp); e.Error == "" {
			t.Fatalf("%s: empty error", path)
		}
	}
	// Another tenant's server is not found either.
	otherTok := b.issue(t, uuid.New(), "mcp:read")
	if resp := b.do(t, req{path: "/v0.1/servers/local.mcpd%2Fcalendar/versions", token: otherTok}); resp.code != http.StatusNotFound {
		t.Fatalf("another tenant: %d", resp.code)
	}
	// A deregistered server: found with include_deleted=true only.
	b.post(t, "/v1/mcp/servers/deregister", `{"server_id":"`+srv.ServerID.String()+`"}`)
	if resp := b.get(t, "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest"); resp.code != http.StatusNotFound {
		t.Fatalf("deregistered: %d, want 404", resp.code)
	}
	resp := b.get(t, "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest?include_deleted=true")
	if resp.code != http.StatusOK || strictDecode[oaServerResponse](t, resp).health(t).Status != "deregistered" {
		t.Fatalf("deregistered with include_deleted: %d %s", resp.code, resp.body)
	}
}

func TestRegistryWriteSideAndAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "calendar")
	for _, r := range []req{
		{method: http.MethodPost, path: "/v0.1/publish", body: `{}`},
		{method: http.MethodPut, path: "/v0.1/servers/local.mcpd%2Fcalendar/versions/1.3.2", body: `{}`},
		{method: http.MethodDelete, path: "/v0.1/servers/local.mcpd%2Fcalendar/versions/1.3.2"},
		{method: http.MethodPatch, path: "/v0.1/servers/local.mcpd%2Fcalendar/versions/1.3.2/status", body: `{}`},
		{method: http.MethodPatch, path: "/v0.1/servers/local.mcpd%2Fcalendar/status", body: `{}`},
	} {
		resp := b.do(t, r)
		if resp.code != http.StatusNotImplemented {
			t.Fatalf("%s %s: %d %s, want 501", r.method, r.path, resp.code, resp.body)
		}
		if e := strictDecode[oaError](t, resp); e.Error == "" {
			t.Fatalf("%s %s: empty error", r.method, r.path)
		}
	}
	if resp := b.do(t, req{path: "/v0.1/servers", token: "-"}); resp.code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.code)
	}
	if resp := b.do(t, req{path: "/v0.1/servers", token: b.readTok}); resp.code != http.StatusOK {
		t.Fatalf("read token: %d", resp.code)
	}
	if resp := b.do(t, req{path: "/v0.1/servers", token: b.issue(t, b.tenant, "other:scope")}); resp.code != http.StatusForbidden {
		t.Fatalf("no read scope: %d", resp.code)
	}
	resp := b.do(t, req{path: "/v0.1/servers", token: b.issue(t, uuid.New(), "mcp:read")})
	if got := names(strictDecode[oaServerList](t, resp)); len(got) != 0 {
		t.Fatalf("another tenant sees %v", got)
	}
}
