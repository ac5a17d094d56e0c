package cli

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

func TestRegisterParse(t *testing.T) {
	t.Parallel()
	caps := writeFile(t, "caps.json", "{\n  \"tools\": {\"listChanged\": true}\n}\n")
	sj := writeFile(t, "server.json", `{
  "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
  "name": "io.github.acme/Weather-Tools",
  "description": "Forecasts",
  "title": "Weather",
  "version": "2.1.0",
  "packages": [{"registryType": "npm", "identifier": "@acme/weather", "version": "2.1.0", "transport": {"type": "stdio"}}],
  "remotes": [
    {"type": "streamable-http", "url": "https://weather.example.com/mcp"},
    {"type": "sse", "url": "https://weather.example.com/sse", "headers": [{"name": "X-Key"}]}
  ]
}`)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want registerOptions
	}{
		{
			name: "minimal",
			args: []string{"--module", "calendar", "--version", "1.3.2", "--protocol", "2025-06-18"},
			want: registerOptions{Module: "calendar", Version: "1.3.2", Protocols: []string{"2025-06-18"}},
		},
		{
			name: "everything",
			args: []string{
				"--module", "calendar", "--version", "1.3.2", "--protocol", "2025-06-18", "--protocol", "2025-03-26,2024-11-05",
				"--capabilities", caps, "--skill", "list-events=List the events, of a day", "--skill", "create-event",
				"--traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			},
			env: map[string]string{EnvTraceparent: "00-11111111111111111111111111111111-2222222222222222-01"},
			want: registerOptions{
				Module: "calendar", Version: "1.3.2",
				Protocols:        []string{"2025-06-18", "2025-03-26", "2024-11-05"},
				CapabilitiesFile: caps,
				Skills:           []string{"list-events=List the events, of a day", "create-event"},
				Traceparent:      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				Capabilities:     json.RawMessage(`{"tools":{"listChanged":true}}`),
				SkillInfos:       []registry.SkillInfo{{Name: "list-events", Description: "List the events, of a day"}, {Name: "create-event"}},
			},
		},
		{
			name: "remotes, description, title",
			args: []string{"--module", "calendar", "--version", "1.3.2", "--protocol", "2025-06-18",
				"--remote", "https://cal.example/mcp", "--remote", "http://10.0.0.1:3000/mcp", "--remote-type", "sse",
				"--description", "The calendar", "--title", "Calendar"},
			want: registerOptions{Module: "calendar", Version: "1.3.2", Protocols: []string{"2025-06-18"},
				Remotes: []string{"https://cal.example/mcp", "http://10.0.0.1:3000/mcp"}, RemoteType: "sse",
				Description: "The calendar", Title: "Calendar",
				RemoteList: []registry.Remote{{Type: "sse", URL: "https://cal.example/mcp"}, {Type: "sse", URL: "http://10.0.0.1:3000/mcp"}}},
		},
		{
			name: "server.json",
			args: []string{"--server-json", sj, "--protocol", "2025-11-25", "--skill", "forecast"},
			want: registerOptions{Module: "weather-tools", Version: "2.1.0", Protocols: []string{"2025-11-25"},
				ServerJSON: sj, Description: "Forecasts", Title: "Weather",
				Skills: []string{"forecast"}, SkillInfos: []registry.SkillInfo{{Name: "forecast"}},
				RemoteList: []registry.Remote{{Type: "streamable-http", URL: "https://weather.example.com/mcp"},
					{Type: "sse", URL: "https://weather.example.com/sse"}}},
		},
		{
			name: "server.json and flags that win",
			args: []string{"--server-json", sj, "--protocol", "2025-11-25", "--version", "3.0.0", "--title", "W",
				"--remote", "https://other.example/mcp"},
			want: registerOptions{Module: "weather-tools", Version: "3.0.0", Protocols: []string{"2025-11-25"},
				ServerJSON: sj, Description: "Forecasts", Title: "W", Remotes: []string{"https://other.example/mcp"},
				RemoteList: []registry.Remote{{Type: "streamable-http", URL: "https://other.example/mcp"}}},
		},
		{
			name: "traceparent from the environment",
			args: []string{"--module", "calendar", "--version", "1.3.2", "--protocol", "2025-06-18"},
			env:  map[string]string{EnvTraceparent: "00-11111111111111111111111111111111-2222222222222222-01"},
			want: registerOptions{Module: "calendar", Version: "1.3.2", Protocols: []string{"2025-06-18"},
				Traceparent: "00-11111111111111111111111111111111-2222222222222222-01"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got *registerOptions
			cmd := newCmdRegister(testFactory(newTestIO(), c.env), func(o *registerOptions) error { got = o; return nil })
			if err := execute(t, cmd, c.args...); err != nil {
				t.Fatal(err)
			}
			got.IO, got.Client, got.Printer, got.set = nil, nil, nil, nil
			if c.want.RemoteType == "" {
				c.want.RemoteType = registry.RemoteStreamableHTTP
			}
			if !reflect.DeepEqual(*got, c.want) {
				t.Fatalf("options\n%+v\nwant\n%+v", *got, c.want)
			}
		})
	}
}

func TestRegisterParseErrors(t *testing.T) {
	t.Parallel()
	notObject := writeFile(t, "caps.json", `["tools"]`)
	twoValues := writeFile(t, "caps2.json", `{} {}`)
	badName := writeFile(t, "bad.json", `{"name": "io.github.acme/weather_tools", "version": "1.0.0"}`)
	noSlash := writeFile(t, "noslash.json", `{"name": "weather", "version": "1.0.0"}`)
	badRemote := writeFile(t, "badremote.json", `{"name": "a/weather", "version": "1.0.0", "remotes": [{"type": "streamable-http", "url": "https://{tenant}.example/mcp"}]}`)
	base := []string{"--module", "calendar", "--version", "1.3.2", "--protocol", "2025-06-18"}
	cases := []struct {
		name  string
		args  []string
		usage bool // else: cobra's own error (exit 2 too)
	}{
		{"no protocol", []string{"--module", "calendar", "--version", "1.3.2"}, false}, // cobra's required flag error
		{"capabilities not an object", append(base[:6:6], "--capabilities", notObject), true},
		{"capabilities two values", append(base[:6:6], "--capabilities", twoValues), true},
		{"skill without name", append(base[:6:6], "--skill", "=desc"), true},
		{"positional argument", append(base[:6:6], "extra"), true},
		{"capabilities missing", append(base[:6:6], "--capabilities", "/nonexistent/caps.json"), true},
		{"capabilities a directory", append(base[:6:6], "--capabilities", t.TempDir()), true},
		{"remote relative", append(base[:6:6], "--remote", "/mcp"), true},
		{"remote with user-info", append(base[:6:6], "--remote", "https://u:p@a.example/mcp"), true},
		{"remote type stdio", append(base[:6:6], "--remote", "https://a.example/mcp", "--remote-type", "stdio"), true},
		{"nine remotes", append(base[:6:6], strings.Split(strings.Repeat("--remote https://a.example/ ", 9), " ")[:18]...), true},
		{"server.json name not a module", []string{"--server-json", badName, "--protocol", "2025-06-18"}, true},
		{"server.json name without slash", []string{"--server-json", noSlash, "--protocol", "2025-06-18"}, true},
		{"server.json not json", []string{"--server-json", notObject, "--protocol", "2025-06-18"}, true},
		{"server.json bad remote", []string{"--server-json", badRemote, "--protocol", "2025-06-18"}, true},
		{"server.json missing", []string{"--server-json", "/nonexistent/server.json", "--protocol", "2025-06-18"}, true},
		{"server.json and module", []string{"--server-json", noSlash, "--module", "x", "--protocol", "2025-06-18"}, false},
		{"neither module nor server.json", []string{"--version", "1.0.0", "--protocol", "2025-06-18"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := newCmdRegister(testFactory(newTestIO(), nil), func(*registerOptions) error {
				t.Fatal("runF reached")
				return nil
			})
			err := execute(t, cmd, c.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if asUsage(err) != c.usage {
				t.Fatalf("error %v: usage %v, want %v", err, asUsage(err), c.usage)
			}
		})
	}
}

func TestServerIDCommandsParse(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c")
	f := testFactory(newTestIO(), nil)
	var got uuid.UUID
	var gotModule string
	capture := map[string]func() error{
		"heartbeat": func() error {
			return execute(t, newCmdHeartbeat(f, func(o *serverIDOptions) error { got = o.ServerID; return nil }), id.String())
		},
		"deregister": func() error {
			return execute(t, newCmdDeregister(f, func(o *serverIDOptions) error { got = o.ServerID; return nil }), id.String())
		},
		"get": func() error {
			return execute(t, newCmdServersGet(f, func(o *serverIDOptions) error { got = o.ServerID; return nil }), id.String())
		},
		"skills": func() error {
			return execute(t, newCmdServersSkills(f, func(o *serverIDOptions) error { got = o.ServerID; return nil }), id.String())
		},
	}
	for name, run := range capture {
		got = uuid.Nil
		if err := run(); err != nil || got != id {
			t.Errorf("%s: id %s, err %v; want %s", name, got, err, id)
		}
	}
	// A module name stands for the tenant's server of that module.
	for name, cmd := range map[string]func(f *Factory) *cobra.Command{
		"heartbeat": func(f *Factory) *cobra.Command {
			return newCmdHeartbeat(f, func(o *serverIDOptions) error { got = o.ServerID; gotModule = o.Module; return nil })
		},
		"deregister": func(f *Factory) *cobra.Command {
			return newCmdDeregister(f, func(o *serverIDOptions) error { got = o.ServerID; gotModule = o.Module; return nil })
		},
		"get": func(f *Factory) *cobra.Command {
			return newCmdServersGet(f, func(o *serverIDOptions) error { got = o.ServerID; gotModule = o.Module; return nil })
		},
		"skills": func(f *Factory) *cobra.Command {
			return newCmdServersSkills(f, func(o *serverIDOptions) error { got = o.ServerID; gotModule = o.Module; return nil })
		},
	} {
		got, gotModule = id, ""
		if err := execute(t, cmd(f), "calendar-2"); err != nil || got != uuid.Nil || gotModule != "calendar-2" {
			t.Errorf("%s calendar-2: id %s module %q, err %v", name, got, gotModule, err)
		}
	}
	for _, args := range [][]string{{"Not_A_UUID"}, {"6f1c2a4e8b0d4c3e9f6a1d2e3f4a5b6c"}, {"9calendar"}, {strings.Repeat("a", 64)}, {}, {id.String(), id.String()}} {
		err := execute(t, newCmdHeartbeat(f, func(*serverIDOptions) error { t.Fatal("runF reached"); return nil }), args...)
		if !isUsage(err) {
			t.Errorf("heartbeat %q: error %v, want a usage error", args, err)
		}
	}
}

func TestListParse(t *testing.T) {
	t.Parallel()
	var got *listOptions
	cmd := newCmdServersList(testFactory(newTestIO(), nil), func(o *listOptions) error { got = o; return nil })
	if err := execute(t, cmd, "--status", "degraded", "--module", "calendar", "--limit", "5"); err != nil {
		t.Fatal(err)
	}
	if got.Status != registry.StatusDegraded || got.Module != "calendar" || got.Limit != 5 {
		t.Fatalf("options %+v", got)
	}
	for _, args := range [][]string{{"--status", "sick"}, {"--limit", "-1"}, {"extra"}} {
		cmd := newCmdServersList(testFactory(newTestIO(), nil), func(*listOptions) error { t.Fatal("runF reached"); return nil })
		if err := execute(t, cmd, args...); !isUsage(err) {
			t.Errorf("list %q: error %v, want a usage error", args, err)
		}
	}
}

func TestAuditListParse(t *testing.T) {
	t.Parallel()
	var got *auditListOptions
	cmd := newCmdAuditList(testFactory(newTestIO(), nil), func(o *auditListOptions) error { got = o; return nil })
	id := "6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c"
	if err := execute(t, cmd, "--server-id", id, "--kind", "mcp.server.unhealthy", "--limit", "3"); err != nil {
		t.Fatal(err)
	}
	if got.ServerID == nil || got.ServerID.String() != id || got.Kind != registry.KindUnhealthy || got.Limit != 3 {
		t.Fatalf("options %+v", got)
	}
	for _, args := range [][]string{{"--server-id", "x"}, {"--kind", "mcp.server.exploded"}} {
		cmd := newCmdAuditList(testFactory(newTestIO(), nil), func(*auditListOptions) error { t.Fatal("runF reached"); return nil })
		if err := execute(t, cmd, args...); !isUsage(err) {
			t.Errorf("audit list %q: error %v, want a usage error", args, err)
		}
	}
}

func TestTokenIssueParse(t *testing.T) {
	t.Parallel()
	var got *tokenIssueOptions
	cmd := newCmdTokenIssue(testFactory(newTestIO(), nil), func(o *tokenIssueOptions) error { got = o; return nil })
	tenant := "0b6e3c1a-2f4d-4e5b-8a9c-7d6e5f4a3b2c"
	secret := testSecret(t)
	secretFile := writeFile(t, "jwt.secret", string(secret)+"\r\n")
	if err := execute(t, cmd, "--tenant", tenant, "--scope", " mcp:read   mcp:write ", "--secret-file", secretFile, "--ttl", "24h", "--subject", "ci"); err != nil {
		t.Fatal(err)
	}
	if got.Tenant.String() != tenant || got.Scope != "mcp:read mcp:write" || got.SecretFile != secretFile || string(got.Secret) != string(secret) || got.TTL != 24*time.Hour || got.Subject != "ci" {
		t.Fatalf("options %+v", got)
	}
	got = nil
	cmd = newCmdTokenIssue(testFactory(newTestIO(), nil), func(o *tokenIssueOptions) error { got = o; return nil })
	if err := execute(t, cmd, "--tenant", tenant, "--scope", "mcp:read", "--secret-file", secretFile); err != nil {
		t.Fatal(err)
	}
	if got.TTL != time.Hour || got.Subject != "mcpctl" {
		t.Fatalf("defaults: ttl %s subject %q, want 1h and mcpctl", got.TTL, got.Subject)
	}
	for _, args := range [][]string{
		{"--tenant", "nope", "--scope", "mcp:read", "--secret-file", secretFile},
		{"--tenant", uuid.Nil.String(), "--scope", "mcp:read", "--secret-file", secretFile},
		{"--tenant", tenant, "--scope", "mcp:admin", "--secret-file", secretFile},
		{"--tenant", tenant, "--scope", " ", "--secret-file", secretFile},
		{"--tenant", tenant, "--scope", "mcp:read", "--secret-file", secretFile, "--ttl", "0s"},
		{"--tenant", tenant, "--scope", "mcp:read", "--secret-file", filepath.Join(t.TempDir(), "missing")},
		{"--tenant", tenant, "--scope", "mcp:read", "--secret-file", t.TempDir()},
		{"--tenant", tenant, "--scope", "mcp:read", "--secret-file", writeFile(t, "short.secret", "0123456789\n")},
		{"--tenant", tenant, "--scope", "mcp:read", "--secret-file", writeFile(t, "empty.secret", "\n")},
	} {
		cmd := newCmdTokenIssue(testFactory(newTestIO(), nil), func(*tokenIssueOptions) error { t.Fatal("runF reached"); return nil })
		if err := execute(t, cmd, args...); !isUsage(err) {
			t.Errorf("token issue %q: error %v, want a usage error", args, err)
		}
	}
}

func TestMigrateParse(t *testing.T) {
	t.Parallel()
	newF := func(ts *testStreams) *Factory {
		f := testFactory(ts, nil)
		f.cfg = &Config{Server: DefaultServer, Output: output.Table, DatabaseURL: "postgres://owner@127.0.0.1/mcpd"}
		return f
	}
	var got *migrateOptions
	capture := func(o *migrateOptions) error { got = o; return nil }

	if err := execute(t, newCmdMigrateDown(newF(newTestIO()), capture), "2"); err != nil || got.Steps != 2 || got.All {
		t.Fatalf("down 2: %+v, %v", got, err)
	}
	if err := execute(t, newCmdMigrateDown(newF(newTestIO()), capture), "--all"); err != nil || got.Steps != 0 || !got.All {
		t.Fatalf("down --all: %+v, %v", got, err)
	}
	if err := execute(t, newCmdMigrateUp(newF(newTestIO()), capture)); err != nil || got.DatabaseURL != "postgres://owner@127.0.0.1/mcpd" {
		t.Fatalf("up: %+v, %v", got, err)
	}
	for _, args := range [][]string{{}, {"0"}, {"x"}, {"1", "2"}, {"1", "--all"}} {
		err := execute(t, newCmdMigrateDown(newF(newTestIO()), func(*migrateOptions) error { t.Fatal("runF reached"); return nil }), args...)
		if !isUsage(err) {
			t.Errorf("down %q: error %v, want a usage error", args, err)
		}
	}
	// With no URL anywhere, migrate is bad usage.
	f := testFactory(newTestIO(), nil)
	f.cfg = &Config{Server: DefaultServer, Output: output.Table}
	if err := execute(t, newCmdMigrateStatus(f, "status", capture)); !isUsage(err) {
		t.Fatalf("status without a URL: %v, want a usage error", err)
	}
}

func TestWatchParse(t *testing.T) {
	t.Parallel()
	ts := newTestIO()
	ts.outTTY = true
	var got *watchOptions
	cmd := newCmdWatch(testFactory(ts, map[string]string{"NO_COLOR": "1"}), func(o *watchOptions) error { got = o; return nil })
	if err := execute(t, cmd, "--relist", "1m"); err != nil {
		t.Fatal(err)
	}
	if got.Relist != time.Minute || !got.NoColor {
		t.Fatalf("options %+v", got)
	}
	// No periodic list by default; the old --refresh is accepted and ignored.
	cmd = newCmdWatch(testFactory(ts, nil), func(o *watchOptions) error { got = o; return nil })
	if err := execute(t, cmd, "--refresh", "5s"); err != nil {
		t.Fatal(err)
	}
	if got.Relist != 0 {
		t.Fatalf("options %+v, want no relist", got)
	}
	// Not a terminal, or a relist too frequent: bad usage.
	cmd = newCmdWatch(testFactory(newTestIO(), nil), func(*watchOptions) error { t.Fatal("runF reached"); return nil })
	if err := execute(t, cmd); !isUsage(err) {
		t.Fatalf("watch on a pipe: %v, want a usage error", err)
	}
	cmd = newCmdWatch(testFactory(ts, nil), func(*watchOptions) error { t.Fatal("runF reached"); return nil })
	if err := execute(t, cmd, "--relist", "1s"); !isUsage(err) {
		t.Fatalf("watch --relist 1s: %v, want a usage error", err)
	}
}

func TestSkillsListParse(t *testing.T) {
	t.Parallel()
	var got *skillsListOptions
	parse := func(args ...string) *skillsListOptions {
		t.Helper()
		got = nil
		cmd := newCmdSkillsList(testFactory(newTestIO(), nil), func(o *skillsListOptions) error { got = o; return nil })
		if err := execute(t, cmd, args...); err != nil {
			t.Fatalf("skills list %q: %v", args, err)
		}
		return got
	}
	o := parse("--name", "send-mail", "--module", "mail", "--available", "--protocol", "2025-06-18",
		"--server-status", "healthy", "--limit", "7")
	if o.Name != "send-mail" || o.Module != "mail" || o.Available == nil || !*o.Available ||
		o.Protocol != "2025-06-18" || o.ServerStatus != registry.StatusHealthy || o.Limit != 7 {
		t.Fatalf("options %+v", o)
	}
	if o := parse("--available=false"); o.Available == nil || *o.Available {
		t.Fatalf("--available=false: %+v", o)
	}
	if o := parse(); o.Available != nil {
		t.Fatalf("no --available: %+v", o)
	}
	for _, args := range [][]string{
		{"--server-status", "sick"}, {"--protocol", "june"}, {"--limit", "-1"}, {"extra"},
	} {
		cmd := newCmdSkillsList(testFactory(newTestIO(), nil), func(*skillsListOptions) error { t.Fatal("runF reached"); return nil })
		if err := execute(t, cmd, args...); !isUsage(err) {
			t.Errorf("skills list %q: error %v, want a usage error", args, err)
		}
	}
}

func TestAuditWatchParse(t *testing.T) {
	t.Parallel()
	var got *auditWatchOptions
	cmd := newCmdAuditWatch(testFactory(newTestIO(), nil), func(o *auditWatchOptions) error { got = o; return nil })
	id := "6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c"
	if err := execute(t, cmd, "--server-id", id, "--module", "mail", "--kind", "mcp.server.unhealthy", "--cursor", "abc"); err != nil {
		t.Fatal(err)
	}
	if got.ServerID != id || got.Module != "mail" || got.Kind != registry.KindUnhealthy || got.Cursor != "abc" {
		t.Fatalf("options %+v", got)
	}
	for _, args := range [][]string{{"--server-id", "x"}, {"--kind", "mcp.server.exploded"}, {"extra"}} {
		cmd := newCmdAuditWatch(testFactory(newTestIO(), nil), func(*auditWatchOptions) error { t.Fatal("runF reached"); return nil })
		if err := execute(t, cmd, args...); !isUsage(err) {
			t.Errorf("audit watch %q: error %v, want a usage error", args, err)
		}
	}
}

func TestOutputFlag(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, f := range output.Formats {
		ts := newTestIO()
		fac := testFactory(ts, nil)
		root := NewRootCmd(fac)
		root.SetArgs([]string{"-o", string(f), "version"})
		if _, err := root.ExecuteC(); err != nil {
			t.Fatalf("-o %s version: %v", f, err)
		}
		if f.Structured() {
			var v map[string]any
			if err := decodeAs(f, ts.out.Bytes(), &v); err != nil || v["version"] == nil {
				t.Fatalf("-o %s version printed %q (%v)", f, ts.out, err)
			}
		}
	}
}

// A server.json's packages are ignored with a note on stderr.
func TestRegisterServerJSONNote(t *testing.T) {
	t.Parallel()
	sj := writeFile(t, "server.json", `{"name": "io.github.acme/weather", "version": "1.0.0",
		"packages": [{"registryType": "npm", "identifier": "@acme/weather", "version": "1.0.0", "transport": {"type": "stdio"}}]}`)
	ts := newTestIO()
	cmd := newCmdRegister(testFactory(ts, nil), func(*registerOptions) error { return nil })
	if err := execute(t, cmd, "--server-json", sj, "--protocol", "2025-06-18"); err != nil {
		t.Fatal(err)
	}
	if got := ts.errOut.String(); !strings.Contains(got, "1 packages ignored") {
		t.Fatalf("stderr %q, want the note on packages", got)
	}
}

// TestRegisterServerJSONDuplicateKeys: a server.json that names a member
// twice, or twice but for case, is a usage error (exit 2) naming it, as
// the API refuses such a body. The second name was taken silently.
func TestRegisterServerJSONDuplicateKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ body, key string }{
		{`{"name": "a/weather", "version": "1.0.0", "name": "a/other"}`, "name"},
		{`{"name": "a/weather", "version": "1.0.0", "Version": "2.0.0"}`, "Version"},
		{`{"name": "a/weather", "version": "1.0.0", "remotes": [{"type": "sse", "url": "https://a.example/sse"},
			{"type": "sse", "url": "https://a.example/a", "url": "https://b.example/b"}]}`, "remotes[1].url"},
		{`{"name": "a/weather", "version": "1.0.0", "packages": [{"x": {"k": 1, "k": 2}}]}`, "packages[0].x.k"},
	} {
		sj := writeFile(t, "dup.json", c.body)
		cmd := newCmdRegister(testFactory(newTestIO(), nil), func(*registerOptions) error {
			t.Fatal("runF reached")
			return nil
		})
		err := execute(t, cmd, "--server-json", sj, "--protocol", "2025-06-18")
		if err == nil || !asUsage(err) || !strings.Contains(err.Error(), c.key+" is given twice") {
			t.Errorf("%s: %v, want a usage error naming %s", c.body, err, c.key)
		}
	}
	ok := writeFile(t, "ok.json", `{"name": "a/weather", "version": "1.0.0", "remotes": [{"type": "sse", "url": "https://a.example/sse"},
		{"type": "sse", "url": "https://a.example/a"}], "_meta": {"a": {"name": 1}, "b": {"name": 2}}}`)
	cmd := newCmdRegister(testFactory(newTestIO(), nil), func(*registerOptions) error { return nil })
	if err := execute(t, cmd, "--server-json", ok, "--protocol", "2025-06-18"); err != nil {
		t.Fatalf("a server.json without duplicates: %v", err)
	}
}
