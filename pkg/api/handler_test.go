package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
)

func TestRegisterCreatedThenOK(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	resp := b.do(t, req{method: http.MethodPost, path: registerPath, body: registerBody("calendar", "search"),
		header: map[string]string{"traceparent": tp}})
	if resp.code != http.StatusCreated {
		t.Fatalf("first register: %d %s", resp.code, resp.body)
	}
	if ct := resp.header.Get("Content-Type"); ct != api.ContentTypeJSON {
		t.Fatalf("Content-Type %q", ct)
	}
	first := decode[registry.Server](t, resp)
	if resp.header.Get("Location") != "/v1/mcp/servers/"+first.ServerID.String() {
		t.Fatalf("Location %q", resp.header.Get("Location"))
	}
	if first.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("trace_id %q, want the traceparent's", first.TraceID)
	}
	if first.TenantID != b.tenant || first.Status != registry.StatusHealthy || first.HeartbeatIntervalSecs != 10 {
		t.Fatalf("server %+v", first)
	}

	// The re-registration: same server, 200, updated version.
	body := `{"module_name":"calendar","version":"1.4.0","supported_protocols":["2025-06-18","2025-11-25"]}`
	resp = b.post(t, registerPath, body)
	if resp.code != http.StatusOK {
		t.Fatalf("re-register: %d %s", resp.code, resp.body)
	}
	second := decode[registry.Server](t, resp)
	if second.ServerID != first.ServerID || second.Version != "1.4.0" || len(second.SupportedProtocols) != 2 {
		t.Fatalf("re-register gave %+v, want server %s at 1.4.0", second, first.ServerID)
	}
}

func TestRegisterTraceIDWithoutTraceparent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, tp := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		resp := b.do(t, req{method: http.MethodPost, path: registerPath, body: registerBody(fmt.Sprintf("m%d", i)),
			header: map[string]string{"traceparent": tp}})
		srv := decode[registry.Server](t, resp)
		if !registry.ValidTraceID(srv.TraceID) {
			t.Fatalf("traceparent %q: trace_id %q is not 32 lowercase hex", tp, srv.TraceID)
		}
	}
}

func TestRegisterInputRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	manySkills := make([]string, registry.MaxSkills+1)
	for i := range manySkills {
		manySkills[i] = fmt.Sprintf(`{"name":"s%d"}`, i)
	}
	manyProtocols := strings.TrimSuffix(strings.Repeat(`"2025-06-18",`, registry.MaxProtocols+1), ",")
	ok := func(over string) string {
		// A valid body with over's fields in place of the defaults.
		base := map[string]json.RawMessage{
			"module_name":         json.RawMessage(`"calendar"`),
			"version":             json.RawMessage(`"1.3.2"`),
			"supported_protocols": json.RawMessage(`["2025-06-18"]`),
		}
		var o map[string]json.RawMessage
		if err := json.Unmarshal([]byte(over), &o); err != nil {
			t.Fatalf("test body %s: %v", over, err)
		}
		for k, v := range o {
			if string(v) == `"<delete>"` {
				delete(base, k)
				continue
			}
			base[k] = v
		}
		out, _ := json.Marshal(base)
		return string(out)
	}
	cases := []struct {
		name, body, field string
	}{
		{"module missing", ok(`{"module_name":"<delete>"}`), "module_name"},
		{"module empty", ok(`{"module_name":""}`), "module_name"},
		{"module upper", ok(`{"module_name":"Calendar"}`), "module_name"},
		{"module digit first", ok(`{"module_name":"1cal"}`), "module_name"},
		{"module underscore", ok(`{"module_name":"cal_endar"}`), "module_name"},
		{"module 64 chars", ok(`{"module_name":"a` + strings.Repeat("b", 63) + `"}`), "module_name"},
		{"module number", ok(`{"module_name":5}`), "module_name"},
		{"version missing", ok(`{"version":"<delete>"}`), "version"},
		{"version not semver", ok(`{"version":"1.2"}`), "version"},
		{"version leading v", ok(`{"version":"v1.2.3"}`), "version"},
		{"protocols missing", ok(`{"supported_protocols":"<delete>"}`), "supported_protocols"},
		{"protocols empty", ok(`{"supported_protocols":[]}`), "supported_protocols"},
		{"protocols 17", ok(`{"supported_protocols":[` + manyProtocols + `]}`), "supported_protocols"},
		{"protocol not a date", ok(`{"supported_protocols":["latest"]}`), "supported_protocols"},
		{"protocol bad month", ok(`{"supported_protocols":["2025-13-01"]}`), "supported_protocols"},
		{"protocol before first", ok(`{"supported_protocols":["2024-01-01"]}`), "supported_protocols"},
		{"protocols a string", ok(`{"supported_protocols":"2025-06-18"}`), "supported_protocols"},
		{"capabilities array", ok(`{"capability_advertisement":[1]}`), "capability_advertisement"},
		{"capabilities string", ok(`{"capability_advertisement":"tools"}`), "capability_advertisement"},
		{"skills 257", ok(`{"skills":[` + strings.Join(manySkills, ",") + `]}`), "skills"},
		{"skill name empty", ok(`{"skills":[{"name":""}]}`), "skills[0].name"},
		{"skill name 129", ok(`{"skills":[{"name":"` + strings.Repeat("x", 129) + `"}]}`), "skills[0].name"},
		{"skill names duplicate", ok(`{"skills":[{"name":"a"},{"name":"b"},{"name":"a"}]}`), "skills[2].name"},
		{"unknown field", ok(`{"colour":"red"}`), "colour"},
		{"tenant in body", ok(`{"tenant_id":"` + uuid.NewString() + `"}`), "tenant_id"},
		{"unknown skill field", ok(`{"skills":[{"name":"a","weight":1}]}`), "weight"},
		{"remotes 9", ok(`{"remotes":[` + strings.Repeat(`{"type":"sse","url":"https://a.example/"},`, 8) + `{"type":"sse","url":"https://a.example/"}]}`), "remotes"},
		{"remote type stdio", ok(`{"remotes":[{"type":"stdio","url":"https://a.example/"}]}`), "remotes[0].type"},
		{"remote url relative", ok(`{"remotes":[{"type":"sse","url":"https://a.example/"},{"type":"sse","url":"/mcp"}]}`), "remotes[1].url"},
		{"remote url ftp", ok(`{"remotes":[{"type":"sse","url":"ftp://a.example/"}]}`), "remotes[0].url"},
		{"remote url no host", ok(`{"remotes":[{"type":"sse","url":"https:///mcp"}]}`), "remotes[0].url"},
		{"remote url user-info", ok(`{"remotes":[{"type":"sse","url":"https://u:p@a.example/"}]}`), "remotes[0].url"},
		{"remote url fragment", ok(`{"remotes":[{"type":"sse","url":"https://a.example/mcp#x"}]}`), "remotes[0].url"},
		{"remote url space", ok(`{"remotes":[{"type":"sse","url":"https://a.example/a b"}]}`), "remotes[0].url"},
		{"remote url empty", ok(`{"remotes":[{"type":"sse","url":""}]}`), "remotes[0].url"},
		// What server.schema.json's format "uri" refuses, mcpd refuses too.
		{"remote url angle brackets", ok(`{"remotes":[{"type":"sse","url":"https://a.example/<script>"}]}`), "remotes[0].url"},
		{"remote url quote", ok(`{"remotes":[{"type":"sse","url":"https://a.example/\"x"}]}`), "remotes[0].url"},
		{"remote url non-ASCII host", ok(`{"remotes":[{"type":"sse","url":"https://bücher.example/"}]}`), "remotes[0].url"},
		{"remote url bidi mark", ok(`{"remotes":[{"type":"sse","url":"https://a.example/\u202e"}]}`), "remotes[0].url"},
		{"remote url port 99999", ok(`{"remotes":[{"type":"sse","url":"https://a.example:99999/"}]}`), "remotes[0].url"},
		{"remote url too long", ok(`{"remotes":[{"type":"sse","url":"https://a.example/` + strings.Repeat("x", 2048) + `"}]}`), "remotes[0].url"},
		{"unknown remote field", ok(`{"remotes":[{"type":"sse","url":"https://a.example/","headers":[]}]}`), "headers"},
		{"description empty", ok(`{"description":""}`), "description"},
		{"description 101", ok(`{"description":"` + strings.Repeat("é", 101) + `"}`), "description"},
		{"title empty", ok(`{"title":""}`), "title"},
		{"title 101", ok(`{"title":"` + strings.Repeat("t", 101) + `"}`), "title"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, b.post(t, registerPath, c.body), http.StatusBadRequest, c.field)
		})
	}

	t.Run("accepted", func(t *testing.T) {
		for i, body := range []string{
			ok(`{"module_name":"a` + strings.Repeat("b", 62) + `"}`),
			ok(`{"supported_protocols":["2027-01-01"]}`),
			ok(`{"version":"2.0.0-rc.1+build.5"}`),
			ok(`{"capability_advertisement":{"tools":{"listChanged":true}}}`),
			ok(`{"capability_advertisement":null}`),
			ok(`{"skills":[{"name":"` + strings.Repeat("x", 128) + `","description":"d"}]}`),
			ok(`{"remotes":[` + strings.Repeat(`{"type":"streamable-http","url":"http://10.0.0.1:8080/mcp?x=1"},`, 7) + `{"type":"sse","url":"https://a.example/` + strings.Repeat("x", 2000) + `"}]}`),
			ok(`{"description":"` + strings.Repeat("é", 100) + `","title":"` + strings.Repeat("t", 100) + `"}`),
		} {
			resp := b.post(t, registerPath, strings.Replace(body, `"calendar"`, fmt.Sprintf(`"ok%d"`, i), 1))
			if resp.code != http.StatusCreated && resp.code != http.StatusOK {
				t.Fatalf("%s: %d %s", body, resp.code, resp.body)
			}
		}
	})
}

func TestBodyRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.register(t, "calendar").ServerID.String()
	good := `{"server_id":"` + id + `"}`
	const hb = "/v1/mcp/servers/heartbeat"
	cases := []struct {
		name   string
		r      req
		status int
		typ    string
	}{
		{"no content type", req{path: hb, body: good, ctype: "-"}, 415, api.ProblemUnsupportedMediaType},
		{"text/plain", req{path: hb, body: good, ctype: "text/plain"}, 415, api.ProblemUnsupportedMediaType},
		{"form", req{path: hb, body: good, ctype: "application/x-www-form-urlencoded"}, 415, api.ProblemUnsupportedMediaType},
		{"too large", req{path: hb, body: `{"server_id":"` + strings.Repeat("a", api.MaxBodyBytes) + `"}`}, 413, api.ProblemTooLarge},
		{"too large whitespace", req{path: hb, body: good + strings.Repeat(" ", api.MaxBodyBytes)}, 413, api.ProblemTooLarge},
		{"empty", req{method: http.MethodPost, path: hb}, 400, api.ProblemMalformed},
		{"whitespace only", req{path: hb, body: "  \n"}, 400, api.ProblemMalformed},
		{"not json", req{path: hb, body: "server_id=" + id}, 400, api.ProblemMalformed},
		{"truncated", req{path: hb, body: `{"server_id":"`}, 400, api.ProblemMalformed},
		{"trailing object", req{path: hb, body: good + `{}`}, 400, api.ProblemMalformed},
		{"trailing garbage", req{path: hb, body: good + `x`}, 400, api.ProblemMalformed},
		{"array", req{path: hb, body: `[` + good + `]`}, 400, api.ProblemMalformed},
		{"string", req{path: hb, body: `"` + id + `"`}, 400, api.ProblemMalformed},
		{"null", req{path: hb, body: `null`}, 400, api.ProblemValidation},
		{"register empty", req{method: http.MethodPost, path: registerPath}, 400, api.ProblemMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.r.method == "" {
				c.r.method = http.MethodPost
			}
			p := wantProblem(t, b.do(t, c.r), c.status, "")
			if p.Type != c.typ {
				t.Fatalf("type %q, want %q", p.Type, c.typ)
			}
		})
	}
	t.Run("charset and trailing whitespace accepted", func(t *testing.T) {
		resp := b.do(t, req{method: http.MethodPost, path: hb, body: good + "\n\t ", ctype: "application/json; charset=utf-8"})
		if resp.code != http.StatusOK {
			t.Fatalf("%d %s", resp.code, resp.body)
		}
	})
}

func TestServerIDRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	u := uuid.New()
	bad := []string{"", "x", "123", strings.ReplaceAll(u.String(), "-", ""), "urn:uuid:" + u.String(),
		"{" + u.String() + "}", u.String() + "0", strings.Replace(u.String(), "-", "g", 1)}
	for _, p := range []string{"/v1/mcp/servers/heartbeat", "/v1/mcp/servers/deregister"} {
		for _, id := range bad {
			body := `{"server_id":` + fmt.Sprintf("%q", id) + `}`
			wantProblem(t, b.post(t, p, body), http.StatusBadRequest, "server_id")
		}
		wantProblem(t, b.post(t, p, `{"server_id":5}`), http.StatusBadRequest, "server_id")
		wantProblem(t, b.post(t, p, `{}`), http.StatusBadRequest, "server_id")
	}
	for _, id := range bad[1:] {
		esc := strings.NewReplacer("{", "%7B", "}", "%7D").Replace(id)
		wantProblem(t, b.get(t, "/v1/mcp/servers/"+esc), http.StatusBadRequest, "server_id")
		wantProblem(t, b.get(t, "/v1/mcp/servers/"+esc+"/skills"), http.StatusBadRequest, "server_id")
		wantProblem(t, b.get(t, "/v1/mcp/audit?server_id="+esc), http.StatusBadRequest, "server_id")
	}
	// A well-formed id that does not exist is 404.
	wantProblem(t, b.get(t, "/v1/mcp/servers/"+u.String()), http.StatusNotFound, "")
	wantProblem(t, b.get(t, "/v1/mcp/servers/"+strings.ToUpper(u.String())), http.StatusNotFound, "")
	wantProblem(t, b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+u.String()+`"}`), http.StatusNotFound, "")
}

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.register(t, "calendar").ServerID.String()
	expired, err := issueAt(b.secret, b.tenant, "mcp:read mcp:write", time.Now().Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	otherSecret, err := issueWith([]byte(strings.Repeat("z", 32)), b.tenant, "mcp:read mcp:write")
	if err != nil {
		t.Fatal(err)
	}
	hb := `{"server_id":"` + id + `"}`

	unauthorized := []struct {
		name   string
		header string
		also   string // a second Authorization header
	}{
		{name: "two headers, the first valid", header: "Bearer " + b.token, also: "Bearer " + otherSecret},
		{name: "two headers, both valid", header: "Bearer " + b.token, also: "Bearer " + b.token},
		{name: "no header"},
		{name: "basic", header: "Basic dXNlcjpwYXNz"},
		{name: "bearer empty", header: "Bearer "},
		{name: "garbage", header: "Bearer not.a.jwt"},
		{name: "expired", header: "Bearer " + expired},
		{name: "alg none", header: "Bearer " + noneToken(b.tenant)},
		{name: "wrong secret", header: "Bearer " + otherSecret},
		{name: "tampered", header: "Bearer " + b.token[:len(b.token)-2] + "xx"},
	}
	for _, c := range unauthorized {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []req{
				{method: http.MethodPost, path: "/v1/mcp/servers/heartbeat", body: hb},
				{path: "/v1/mcp/servers"},
				{path: "/v1/mcp/servers/" + id},
				{path: "/v1/mcp/audit"},
			} {
				r.token = "-"
				if c.header != "" {
					r.header = map[string]string{"Authorization": c.header}
				}
				if c.also != "" {
					r.also = map[string]string{"Authorization": c.also}
				}
				resp := b.do(t, r)
				wantProblem(t, resp, http.StatusUnauthorized, "")
				if !strings.HasPrefix(resp.header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("%s %s: WWW-Authenticate %q", r.method, r.path, resp.header.Get("WWW-Authenticate"))
				}
			}
		})
	}

	noScope := b.issue(t, b.tenant, "")
	otherScope := b.issue(t, b.tenant, "mcp:admin")
	t.Run("read token cannot write", func(t *testing.T) {
		for _, p := range []string{registerPath, "/v1/mcp/servers/heartbeat", "/v1/mcp/servers/deregister"} {
			body := hb
			if p == registerPath {
				body = registerBody("calendar")
			}
			wantProblem(t, b.do(t, req{method: http.MethodPost, path: p, body: body, token: b.readTok}), http.StatusForbidden, "")
		}
	})
	t.Run("no scope cannot read", func(t *testing.T) {
		for _, tok := range []string{noScope, otherScope} {
			for _, p := range []string{"/v1/mcp/servers", "/v1/mcp/servers/" + id, "/v1/mcp/servers/" + id + "/skills", "/v1/mcp/audit"} {
				wantProblem(t, b.do(t, req{path: p, token: tok}), http.StatusForbidden, "")
			}
		}
	})
	t.Run("read and write tokens read", func(t *testing.T) {
		for _, tok := range []string{b.readTok, b.token, b.issue(t, b.tenant, "mcp:write")} {
			if resp := b.do(t, req{path: "/v1/mcp/servers/" + id, token: tok}); resp.code != http.StatusOK {
				t.Fatalf("%d %s", resp.code, resp.body)
			}
		}
	})
	t.Run("operational endpoints need no token", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			if resp := b.do(t, req{path: p, token: "-"}); resp.code != http.StatusOK {
				t.Fatalf("%s: %d %s", p, resp.code, resp.body)
			}
		}
	})
}

func TestCrossTenantIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar", "search")
	other := b.issue(t, uuid.New(), "mcp:read mcp:write")
	id := srv.ServerID.String()
	for _, r := range []req{
		{path: "/v1/mcp/servers/" + id},
		{path: "/v1/mcp/servers/" + id + "/skills"},
		{method: http.MethodPost, path: "/v1/mcp/servers/heartbeat", body: `{"server_id":"` + id + `"}`},
		{method: http.MethodPost, path: "/v1/mcp/servers/deregister", body: `{"server_id":"` + id + `"}`},
	} {
		r.token = other
		p := wantProblem(t, b.do(t, r), http.StatusNotFound, "")
		if p.Type != api.ProblemNotFound {
			t.Fatalf("type %q", p.Type)
		}
	}
	list := decode[api.ServerList](t, b.do(t, req{path: "/v1/mcp/servers", token: other}))
	if len(list.Servers) != 0 {
		t.Fatalf("other tenant lists %d servers", len(list.Servers))
	}
	events := decode[api.EventList](t, b.do(t, req{path: "/v1/mcp/audit?server_id=" + id, token: other}))
	if len(events.Events) != 0 {
		t.Fatalf("other tenant sees %d events", len(events.Events))
	}
	// The same module name is another server for another tenant.
	resp := b.do(t, req{method: http.MethodPost, path: registerPath, body: registerBody("calendar"), token: other})
	if resp.code != http.StatusCreated || decode[registry.Server](t, resp).ServerID == srv.ServerID {
		t.Fatalf("other tenant's register: %d %s", resp.code, resp.body)
	}
	// And the first tenant's server is untouched.
	if got := decode[registry.Server](t, b.get(t, "/v1/mcp/servers/"+id)); got.Status != registry.StatusHealthy {
		t.Fatalf("status %s", got.Status)
	}
}

func TestHeartbeatAndDeregister(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar", "search")
	body := `{"server_id":"` + srv.ServerID.String() + `"}`
	b.clock.Advance(3 * time.Second)
	resp := b.post(t, "/v1/mcp/servers/heartbeat", body)
	if resp.code != http.StatusOK {
		t.Fatalf("heartbeat: %d %s", resp.code, resp.body)
	}
	got := decode[registry.Server](t, resp)
	if !got.LastHeartbeatAt.Equal(b.clock.Now()) || got.TraceID != srv.TraceID {
		t.Fatalf("heartbeat answered %+v", got)
	}

	for i := 0; i < 2; i++ { // idempotent
		resp = b.post(t, "/v1/mcp/servers/deregister", body)
		if resp.code != http.StatusOK {
			t.Fatalf("deregister %d: %d %s", i, resp.code, resp.body)
		}
		got = decode[registry.Server](t, resp)
		if got.Status != registry.StatusDeregistered || got.DeregisteredAt == nil {
			t.Fatalf("deregister answered %+v", got)
		}
	}
	skills := decode[api.SkillList](t, b.get(t, "/v1/mcp/servers/"+srv.ServerID.String()+"/skills"))
	if len(skills.Skills) != 1 || skills.Skills[0].Available {
		t.Fatalf("skills after deregister: %+v", skills)
	}
	p := wantProblem(t, b.post(t, "/v1/mcp/servers/heartbeat", body), http.StatusConflict, "")
	if p.Type != api.ProblemDeregistered {
		t.Fatalf("type %q", p.Type)
	}
	// Registering again brings it back under the same id.
	again := decode[registry.Server](t, b.post(t, registerPath, registerBody("calendar", "search")))
	if again.ServerID != srv.ServerID || again.Status != registry.StatusHealthy || again.DeregisteredAt != nil {
		t.Fatalf("re-register after deregister: %+v", again)
	}
	events := decode[api.EventList](t, b.get(t, "/v1/mcp/audit?server_id="+srv.ServerID.String()))
	var kinds []string
	for _, e := range events.Events {
		kinds = append(kinds, string(e.Kind))
	}
	want := "mcp.server.registered mcp.server.deregistered mcp.server.registered"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("events %v, want %s", kinds, want)
	}
}

func TestLifecycleThroughMonitor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar", "search", "book")
	path := "/v1/mcp/servers/" + srv.ServerID.String()
	ctx := context.Background()
	step := func(d time.Duration, want registry.Status, available bool) {
		t.Helper()
		b.clock.Advance(d)
		if _, err := b.monitor.Sweep(ctx, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if got := decode[registry.Server](t, b.get(t, path)); got.Status != want {
			t.Fatalf("after %s: status %s, want %s", d, got.Status, want)
		}
		for _, s := range decode[api.SkillList](t, b.get(t, path+"/skills")).Skills {
			if s.Available != available {
				t.Fatalf("skill %s available %v, want %v", s.Name, s.Available, available)
			}
		}
	}
	step(19*time.Second, registry.StatusHealthy, true) // one miss
	step(time.Second, registry.StatusDegraded, true)   // 2I
	step(10*time.Second, registry.StatusUnhealthy, false)
	resp := b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+srv.ServerID.String()+`"}`)
	if got := decode[registry.Server](t, resp); got.Status != registry.StatusHealthy {
		t.Fatalf("heartbeat from unhealthy: %s", got.Status)
	}
	step(0, registry.StatusHealthy, true)

	events := decode[api.EventList](t, b.get(t, "/v1/mcp/audit?server_id="+srv.ServerID.String()))
	var kinds []string
	for _, e := range events.Events {
		kinds = append(kinds, string(e.Kind))
		if e.TraceID != srv.TraceID {
			t.Fatalf("event %s trace_id %q, want %q", e.Kind, e.TraceID, srv.TraceID)
		}
	}
	want := "mcp.server.registered mcp.server.degraded mcp.server.unhealthy mcp.server.recovered"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("events %v, want %s", kinds, want)
	}
	unhealthy := events.Events[2]
	if got := strings.Join(unhealthy.Body.SkillsAffected, ","); got != "book,search" {
		t.Fatalf("unhealthy skills_affected %q", got)
	}
}

func TestListServers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	modules := []string{"echo", "alpha", "delta", "charlie", "bravo"}
	ids := map[string]string{}
	for _, m := range modules {
		ids[m] = b.register(t, m).ServerID.String()
	}
	b.post(t, "/v1/mcp/servers/deregister", `{"server_id":"`+ids["charlie"]+`"}`)

	all := decode[api.ServerList](t, b.get(t, "/v1/mcp/servers"))
	if names := moduleNames(all.Servers); names != "alpha bravo charlie delta echo" || all.NextCursor != nil {
		t.Fatalf("list %q next %v", names, all.NextCursor)
	}

	var got []string
	path := "/v1/mcp/servers?limit=2"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		page := decode[api.ServerList](t, b.get(t, path))
		if len(page.Servers) > 2 {
			t.Fatalf("page of %d", len(page.Servers))
		}
		got = append(got, moduleNames(page.Servers))
		if page.NextCursor == nil {
			break
		}
		path = "/v1/mcp/servers?limit=2&cursor=" + *page.NextCursor
	}
	if strings.Join(got, "|") != "alpha bravo|charlie delta|echo" {
		t.Fatalf("pages %q", got)
	}

	dereg := decode[api.ServerList](t, b.get(t, "/v1/mcp/servers?status=deregistered"))
	if moduleNames(dereg.Servers) != "charlie" {
		t.Fatalf("status filter: %q", moduleNames(dereg.Servers))
	}
	healthy := decode[api.ServerList](t, b.get(t, "/v1/mcp/servers?status=healthy&limit=1000"))
	if len(healthy.Servers) != 4 {
		t.Fatalf("healthy: %d", len(healthy.Servers))
	}
	one := decode[api.ServerList](t, b.get(t, "/v1/mcp/servers?module_name=delta"))
	if moduleNames(one.Servers) != "delta" {
		t.Fatalf("module filter: %q", moduleNames(one.Servers))
	}
	none := b.get(t, "/v1/mcp/servers?module_name=zulu")
	if !strings.HasPrefix(string(none.body), `{"servers":[],"next_cursor":null,"watch_cursor":"`) {
		t.Fatalf("empty list body %s", none.body)
	}

	events := decode[api.EventList](t, b.get(t, "/v1/mcp/audit?limit=1"))
	for _, c := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=-1", "limit"}, {"limit=ten", "limit"},
		{"limit=1.5", "limit"}, {"status=dead", "status"}, {"status=HEALTHY", "status"},
		{"module_name=Bad_Name", "module_name"}, {"cursor=%25%25", "cursor"}, {"cursor=bm90LWpzb24", "cursor"},
		{"cursor=" + *events.NextCursor, "cursor"}, // an audit cursor
	} {
		wantProblem(t, b.get(t, "/v1/mcp/servers?"+c.query), http.StatusBadRequest, c.field)
	}
}

func TestListAudit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.register(t, "alpha")
	c := b.register(t, "bravo")
	b.post(t, "/v1/mcp/servers/deregister", `{"server_id":"`+a.ServerID.String()+`"}`)

	all := decode[api.EventList](t, b.get(t, "/v1/mcp/audit"))
	if len(all.Events) != 3 || all.NextCursor != nil {
		t.Fatalf("events %d next %v", len(all.Events), all.NextCursor)
	}
	e := all.Events[0]
	if e.Kind != registry.KindRegistered || e.ServerID != a.ServerID || e.ModuleName != "alpha" || e.FromStatus != nil ||
		e.ToStatus != registry.StatusHealthy || e.Body.Version != "1.3.2" || e.EventID == uuid.Nil {
		t.Fatalf("first event %+v", e)
	}
	raw := string(b.get(t, "/v1/mcp/audit?limit=1").body)
	for _, key := range []string{`"event_id"`, `"from_status":null`, `"occurred_at"`, `"skills_affected":[]`, `"trace_id"`} {
		if !strings.Contains(raw, key) {
			t.Fatalf("event JSON lacks %s: %s", key, raw)
		}
	}

	var kinds []string
	path := "/v1/mcp/audit?limit=1"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		page := decode[api.EventList](t, b.get(t, path))
		for _, e := range page.Events {
			kinds = append(kinds, e.ModuleName+":"+string(e.Kind))
		}
		if page.NextCursor == nil {
			break
		}
		path = "/v1/mcp/audit?limit=1&cursor=" + *page.NextCursor
	}
	want := "alpha:mcp.server.registered bravo:mcp.server.registered alpha:mcp.server.deregistered"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("oldest first: %v", kinds)
	}

	dereg := decode[api.EventList](t, b.get(t, "/v1/mcp/audit?kind=mcp.server.deregistered"))
	if len(dereg.Events) != 1 || dereg.Events[0].ServerID != a.ServerID {
		t.Fatalf("kind filter: %+v", dereg.Events)
	}
	byServer := decode[api.EventList](t, b.get(t, "/v1/mcp/audit?server_id="+c.ServerID.String()))
	if len(byServer.Events) != 1 || byServer.Events[0].ServerID != c.ServerID {
		t.Fatalf("server filter: %+v", byServer.Events)
	}
	servers := decode[api.ServerList](t, b.get(t, "/v1/mcp/servers?limit=1"))
	for _, c := range []struct{ query, field string }{
		{"kind=registered", "kind"}, {"limit=0", "limit"}, {"cursor=xyz", "cursor"},
		{"cursor=" + *servers.NextCursor, "cursor"},
	} {
		wantProblem(t, b.get(t, "/v1/mcp/audit?"+c.query), http.StatusBadRequest, c.field)
	}
}

func TestRoutesAndMethods(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"/", "/v1", "/v1/mcp/server", "/v1/mcp/servers/" + uuid.NewString() + "/tools", "/v2/mcp/servers"} {
		wantProblem(t, b.get(t, p), http.StatusNotFound, "")
	}
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodDelete, "/v1/mcp/servers", "GET"},
		{http.MethodPut, "/v1/mcp/servers/" + uuid.NewString(), "GET"},
		{http.MethodGet, "/v1/mcp/servers/register", "POST"},
		{http.MethodGet, "/v1/mcp/servers/heartbeat", "POST"},
		{http.MethodPut, "/v1/mcp/servers/deregister", "POST"},
		{http.MethodPost, "/v1/mcp/audit", "GET"},
		{http.MethodPost, "/healthz", "GET"},
	} {
		resp := b.do(t, req{method: c.method, path: c.path, body: "{}"})
		p := wantProblem(t, resp, http.StatusMethodNotAllowed, "")
		if p.Type != api.ProblemMethodNotAllowed || !strings.Contains(resp.header.Get("Allow"), c.allow) {
			t.Fatalf("%s %s: type %q Allow %q", c.method, c.path, p.Type, resp.header.Get("Allow"))
		}
	}
}

func TestStoreFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		err    error
		status int
	}{
		{"unavailable", fmt.Errorf("heartbeat: %w: connection refused", registry.ErrUnavailable), 503},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), 503},
		{"connect error", refusedConnectError(t), 503},
		{"other", errors.New("secret internal detail xyzzy"), 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, setupOptions{store: func(clock clockwork.Clock) testStore {
				return &faultStore{Store: memstore.New(clock), err: c.err}
			}})
			for _, resp := range []response{
				b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+uuid.NewString()+`"}`),
				b.get(t, "/v1/mcp/servers/"+uuid.NewString()),
			} {
				wantProblem(t, resp, c.status, "")
				if c.status == 503 && !retryAfterOneToThree(resp.header.Get("Retry-After")) {
					t.Fatalf("Retry-After %q", resp.header.Get("Retry-After"))
				}
				if strings.Contains(string(resp.body), "xyzzy") {
					t.Fatalf("the cause is echoed: %s", resp.body)
				}
			}
			if c.status == 500 && !strings.Contains(b.logs.String(), "xyzzy") {
				t.Fatalf("the cause is not logged: %s", b.logs.String())
			}
			metrics := string(b.get(t, "/metrics").body)
			if !strings.Contains(metrics, `mcpd_heartbeats_total{result="error"} 1`) ||
				!strings.Contains(metrics, "mcpd_store_errors_total 2") {
				t.Fatalf("metrics do not count the fault:\n%s", grepLines(metrics, "mcpd_"))
			}
		})
	}
}

func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{requestTimeout: 50 * time.Millisecond, store: func(clock clockwork.Clock) testStore {
		return &faultStore{Store: memstore.New(clock), fn: func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}}
	}})
	start := time.Now()
	resp := b.get(t, "/v1/mcp/servers/"+uuid.NewString())
	wantProblem(t, resp, http.StatusServiceUnavailable, "")
	if !retryAfterOneToThree(resp.header.Get("Retry-After")) {
		t.Fatalf("Retry-After %q", resp.header.Get("Retry-After"))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s with a 50ms request timeout", d)
	}
}

func TestPanicIsRecovered(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{store: func(clock clockwork.Clock) testStore {
		return &faultStore{Store: memstore.New(clock), fn: func(context.Context) error { panic("boom xyzzy") }}
	}})
	resp := b.get(t, "/v1/mcp/servers/"+uuid.NewString())
	p := wantProblem(t, resp, http.StatusInternalServerError, "")
	if p.Type != api.ProblemInternal || strings.Contains(string(resp.body), "xyzzy") {
		t.Fatalf("problem %s", resp.body)
	}
	if !strings.Contains(b.logs.String(), "boom xyzzy") {
		t.Fatalf("panic not logged: %s", b.logs.String())
	}
	// The handler goes on serving.
	if resp := b.get(t, "/healthz"); resp.code != http.StatusOK {
		t.Fatalf("healthz after panic: %d", resp.code)
	}
}

type pingerFunc func(ctx context.Context) error

func (f pingerFunc) Ping(ctx context.Context) error { return f(ctx) }

func TestReadyz(t *testing.T) {
	t.Parallel()
	var fail error
	b := setup(t, setupOptions{pinger: pingerFunc(func(context.Context) error { return fail })})
	resp := b.do(t, req{path: "/readyz", token: "-"})
	if resp.code != http.StatusOK || string(resp.body) != `{"status":"ready"}` {
		t.Fatalf("ready: %d %s", resp.code, resp.body)
	}
	fail = errors.New("schema at version 3, want 4")
	resp = b.do(t, req{path: "/readyz", token: "-"})
	wantProblem(t, resp, http.StatusServiceUnavailable, "")
	if !retryAfterOneToThree(resp.header.Get("Retry-After")) {
		t.Fatalf("Retry-After %q", resp.header.Get("Retry-After"))
	}
	if resp := b.do(t, req{path: "/healthz", token: "-"}); resp.code != http.StatusOK {
		t.Fatalf("healthz while not ready: %d", resp.code)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar")
	b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+srv.ServerID.String()+`"}`)
	b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+uuid.NewString()+`"}`)
	b.register(t, "mail")
	b.post(t, "/v1/mcp/servers/deregister", `{"server_id":"`+srv.ServerID.String()+`"}`)
	b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+srv.ServerID.String()+`"}`)
	b.clock.Advance(20 * time.Second)
	if _, err := b.monitor.Sweep(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	b.get(t, "/nope")

	resp := b.do(t, req{path: "/metrics", token: "-"})
	if resp.code != http.StatusOK || !strings.HasPrefix(resp.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %q", resp.code, resp.header.Get("Content-Type"))
	}
	text := string(resp.body)
	for _, want := range []string{
		`mcpd_heartbeats_total{result="ok"} 1`,
		`mcpd_heartbeats_total{result="not_found"} 1`,
		`mcpd_heartbeats_total{result="deregistered"} 1`,
		`mcpd_heartbeats_total{result="error"} 0`,
		`mcpd_servers{status="degraded"} 1`,
		`mcpd_servers{status="deregistered"} 1`,
		`mcpd_servers{status="healthy"} 0`,
		`mcpd_servers{status="unhealthy"} 0`,
		`mcpd_transitions_total{from="",to="healthy"} 2`,
		`mcpd_transitions_total{from="healthy",to="deregistered"} 1`,
		`mcpd_transitions_total{from="healthy",to="degraded"} 1`,
		`mcpd_sweep_duration_seconds_count 1`,
		`mcpd_http_request_duration_seconds_count{code="201",route="POST /v1/mcp/servers/register"} 2`,
		`mcpd_http_request_duration_seconds_count{code="404",route="POST /v1/mcp/servers/heartbeat"} 1`,
		`mcpd_http_request_duration_seconds_count{code="409",route="POST /v1/mcp/servers/heartbeat"} 1`,
		`mcpd_http_request_duration_seconds_count{code="404",route="unmatched"} 1`,
		`mcpd_store_errors_total 0`,
		`mcpd_sweep_failures_total 0`,
		`go_goroutines`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", grepLines(text, "mcpd_"))
	}
}

func TestHeartbeatLogsTraceID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar")
	b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+srv.ServerID.String()+`"}`)
	for _, line := range strings.Split(b.logs.String(), "\n") {
		if strings.Contains(line, `"msg":"first heartbeat"`) {
			if !strings.Contains(line, `"trace_id":"`+srv.TraceID+`"`) {
				t.Fatalf("heartbeat log without the trace id: %s", line)
			}
			return
		}
	}
	t.Fatalf("no heartbeat log line: %s", b.logs.String())
}

// FuzzPostBodies: no body makes a POST answer 5xx or panic.
func FuzzPostBodies(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"server_id":null}`, `{"module_name":{"a":1}}`, `{"skills":[null]}`,
		`{"skills":{"name":"a"}}`, `{"capability_advertisement":{"a":` + strings.Repeat("[", 5000) + `}`,
		`{"module_name":"a","version":"1.0.0","supported_protocols":["2025-06-18"],"skills":[{"name":"\u0000"}]}`,
		"\xff\xfe", `{"server_id":"` + uuid.NewString() + `"}`, `{"a":1,"a":2}`, `1e999`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		b := setup(t)
		for _, p := range []string{registerPath, "/v1/mcp/servers/heartbeat", "/v1/mcp/servers/deregister"} {
			resp := b.do(t, req{method: http.MethodPost, path: p, body: body})
			if resp.code >= 500 {
				t.Fatalf("%s %q: %d %s", p, body, resp.code, resp.body)
			}
		}
	})
}

func issueAt(secret []byte, tenant uuid.UUID, scope string, now time.Time) (string, error) {
	return auth.Issue(secret, tenant, "test", scope, time.Hour, now)
}

func issueWith(secret []byte, tenant uuid.UUID, scope string) (string, error) {
	return issueAt(secret, tenant, scope, time.Now())
}

// refusedConnectError is the *pgconn.ConnectError of a connection refused
// on a loopback port where nothing listens.
func refusedConnectError(t *testing.T) error {
	t.Helper()
	_, err := pgconn.Connect(context.Background(), "postgres://mcpd@127.0.0.1:1/mcpd?connect_timeout=2")
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("want a connect error, got %v", err)
	}
	return fmt.Errorf("heartbeat: %w", err)
}

func moduleNames(servers []registry.Server) string {
	var names []string
	for _, s := range servers {
		names = append(names, s.ModuleName)
	}
	return strings.Join(names, " ")
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
