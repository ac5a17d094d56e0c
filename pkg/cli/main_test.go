package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/schema"
)

// isolate points HOME at an empty directory and clears mcpctl's variables,
// so that neither the user's config file nor their environment leaks in.
func isolate(t *testing.T) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	for _, k := range []string{EnvServer, EnvToken, EnvOutput, EnvConfig, EnvDatabaseURL, EnvTraceparent, "NO_COLOR"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

func mainRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ts := newTestIO()
	code = Main(context.Background(), args, ts.io)
	return code, ts.out.String(), ts.errOut.String()
}

func TestMainExitCodes(t *testing.T) {
	isolate(t)
	b := setup(t)
	t.Setenv(EnvServer, b.url)
	t.Setenv(EnvToken, b.token)

	code, out, errOut := mainRun(t, "list")
	if code != 0 || out != "" || errOut != "No servers found\n" {
		t.Fatalf("empty list: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, _ = mainRun(t, "servers", "list", "-o", "json")
	if code != 0 || out != "[]\n" {
		t.Fatalf("empty list -o json: exit %d stdout %q", code, out)
	}

	code, out, errOut = mainRun(t, "register", "--module", "calendar", "--version", "1.3.2", "--protocol", "2025-06-18", "-o", "json")
	var srv registry.Server
	if code != 0 || json.Unmarshal([]byte(out), &srv) != nil || srv.ModuleName != "calendar" {
		t.Fatalf("register: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, _ = mainRun(t, "heartbeat", srv.ServerID.String())
	if code != 0 || !strings.Contains(out, "status\thealthy\n") {
		t.Fatalf("heartbeat: exit %d stdout %q", code, out)
	}
	code, out, _ = mainRun(t, "list")
	if code != 0 || !strings.HasPrefix(out, "calendar\t1.3.2\thealthy\t2025-06-18\t") {
		t.Fatalf("list: exit %d stdout %q", code, out)
	}

	missing := uuid.New()
	code, out, errOut = mainRun(t, "servers", "get", missing.String())
	if code != 1 || out != "" || errOut != "Error: Server not found: no server with this server_id for the token's tenant\n" {
		t.Fatalf("get of a missing server: exit %d stdout %q stderr %q", code, out, errOut)
	}
	// SERVER_ID may be a module name.
	code, out, errOut = mainRun(t, "servers", "get", "calendar", "-o", "json")
	var byModule registry.Server
	if code != 0 || json.Unmarshal([]byte(out), &byModule) != nil || byModule.ServerID != srv.ServerID {
		t.Fatalf("get by module: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, errOut = mainRun(t, "heartbeat", "mail")
	if code != 1 || out != "" || errOut != "Error: no server of module \"mail\" for the token's tenant\n" {
		t.Fatalf("heartbeat of a missing module: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, _, errOut = mainRun(t, "register", "--module", "Bad_Name", "--version", "1.3.2", "--protocol", "2025-06-18")
	if code != 1 || !strings.HasPrefix(errOut, "Error: Invalid input: module_name") {
		t.Fatalf("register of a bad module: exit %d stderr %q", code, errOut)
	}
	code, _, errOut = mainRun(t, "--token", "", "list")
	if code != 1 || !strings.HasPrefix(errOut, "Error: ") {
		t.Fatalf("list without a token: exit %d stderr %q", code, errOut)
	}

	usage := [][]string{
		{"heartbeat", "Not_A_UUID"},
		{"heartbeat"},
		{"deregister", "6f1c"},
		{"servers", "get", "nope!"},
		{"servers", "skills"},
		{"list", "--status", "sick"},
		{"-o", "xml", "list"},
		{"--output=tabel", "servers", "list"},
		{"list", "--no-such-flag"},
		{"bogus"},
		{"servers", "bogus"},
		{"register", "--module", "calendar"},
		{"audit", "list", "--kind", "mcp.server.exploded"},
		{"token", "issue", "--tenant", "x", "--scope", "mcp:read", "--secret-file", "/s"},
		{"completion", "tcsh"},
		{"--server", "ftp://example", "list"},
		{"migrate", "status"},
		{"heartbeat-simulate", "--servers", "0", "--duration", "1s"},
	}
	for _, args := range usage {
		code, out, errOut := mainRun(t, args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "Error: ") || !strings.Contains(errOut, "--help' for usage.") {
			t.Errorf("%q: exit %d stdout %q stderr %q; want 2, a message and a hint", args, code, out, errOut)
		}
	}

	for _, args := range [][]string{{}, {"--help"}, {"servers"}, {"version"}, {"completion", "bash"}} {
		if code, out, errOut := mainRun(t, args...); code != 0 || out == "" {
			t.Errorf("%q: exit %d stdout %d bytes stderr %q; want 0 and output", args, code, len(out), errOut)
		}
	}
}

func TestMainProblemOnStderr(t *testing.T) {
	isolate(t)
	// A stub mcpd that answers every call with a problem.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"type":"https://mcpd.dev/problems/not-found","title":"Not Found","status":404,"detail":"server 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c not found"}`))
	}))
	defer srv.Close()
	code, out, errOut := mainRun(t, "--server", srv.URL, "--token", "t", "deregister", "6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c")
	if code != 1 || out != "" || errOut != "Error: Not Found: server 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c not found\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
}

func TestConfigPrecedence(t *testing.T) {
	isolate(t)
	file := writeFile(t, "config.yaml", "server: http://file.example:1\ntoken: file-token\n")
	resolve := func(t *testing.T, args ...string) *Config {
		t.Helper()
		root := NewRootCmd(NewFactory(newTestIO().io))
		if err := root.PersistentFlags().Parse(args); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(root, root)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}

	if cfg := resolve(t); cfg.Server != DefaultServer || cfg.Token != "" || cfg.Output != output.Table {
		t.Fatalf("defaults: %+v", cfg)
	}
	if cfg := resolve(t, "--config", file); cfg.Server != "http://file.example:1" || cfg.Token != "file-token" {
		t.Fatalf("file: %+v", cfg)
	}
	t.Setenv(EnvServer, "http://env.example:2")
	t.Setenv(EnvOutput, "yaml")
	if cfg := resolve(t, "--config", file); cfg.Server != "http://env.example:2" || cfg.Token != "file-token" || cfg.Output != output.YAML {
		t.Fatalf("env over file: %+v", cfg)
	}
	if cfg := resolve(t, "--config", file, "--server", "http://flag.example:3", "-o", "wide"); cfg.Server != "http://flag.example:3" || cfg.Token != "file-token" || cfg.Output != output.Wide {
		t.Fatalf("flag over env over file: %+v", cfg)
	}
	t.Setenv(EnvToken, "env-token")
	if cfg := resolve(t, "--config", file, "--token", "flag-token"); cfg.Token != "flag-token" {
		t.Fatalf("flag token: %+v", cfg)
	}
	if cfg := resolve(t, "--config", file); cfg.Token != "env-token" {
		t.Fatalf("env token: %+v", cfg)
	}

	// The default file is read when it exists, and is optional.
	os.Unsetenv(EnvServer)
	os.Unsetenv(EnvToken)
	os.Unsetenv(EnvOutput)
	home := os.Getenv("HOME")
	if err := os.MkdirAll(filepath.Join(home, ".config", "mcpctl"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "mcpctl", "config.yaml"), []byte("server: https://home.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg := resolve(t); cfg.Server != "https://home.example" {
		t.Fatalf("default file: %+v", cfg)
	}

	// A named file that is missing, a key that is not known, a bad value:
	// bad usage, exit 2.
	bad := writeFile(t, "bad.yaml", "sever: http://typo.example\n")
	badOutput := writeFile(t, "out.yaml", "output: xml\n")
	for _, args := range [][]string{
		{"--config", filepath.Join(t.TempDir(), "missing.yaml"), "list"},
		{"--config", bad, "list"},
		{"--config", badOutput, "list"},
	} {
		if code, _, errOut := mainRun(t, args...); code != 2 || !strings.HasPrefix(errOut, "Error: ") {
			t.Errorf("%q: exit %d stderr %q, want 2", args, code, errOut)
		}
	}
}

func TestTokenIssueRoundTrip(t *testing.T) {
	t.Parallel()
	secret := testSecret(t)
	path := writeFile(t, "jwt.secret", string(secret)+"\n")
	ts := newTestIO()
	tenant := uuid.New()
	now := time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)
	opts := &tokenIssueOptions{IO: ts.io, Now: func() time.Time { return now }, SecretFile: path, Tenant: tenant, Scope: "mcp:read mcp:write", TTL: 2 * time.Hour, Subject: "ci"}
	if err := tokenIssueRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	tok := ts.out.String()
	if !strings.HasSuffix(tok, "\n") || strings.Count(tok, "\n") != 1 || strings.Count(tok, ".") != 2 {
		t.Fatalf("token issue printed %q, want the token alone on a line", tok)
	}
	v, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret, Now: func() time.Time { return now.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := v.Verify(strings.TrimSpace(tok))
	if err != nil {
		t.Fatal(err)
	}
	if claims.TenantID != tenant || claims.Subject != "ci" || !claims.CanWrite() || !claims.HasScope(auth.ScopeRead) || !claims.ExpiresAt.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("claims %+v", claims)
	}
	other, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: testSecret(t), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Verify(strings.TrimSpace(tok)); err == nil {
		t.Fatal("a token verified with another secret")
	}

	// A missing secret file is bad usage, as every file a flag names: exit 2.
	missingIO := newTestIO()
	code := Main(context.Background(), []string{"token", "issue", "--tenant", tenant.String(), "--scope", "mcp:read", "--secret-file", filepath.Join(t.TempDir(), "none")}, missingIO.io)
	if code != 2 || missingIO.out.Len() != 0 {
		t.Fatalf("missing secret file: exit %d stdout %q", code, missingIO.out)
	}
}

// fakeMigrator records calls and reports a fixed status.
type fakeMigrator struct {
	mu     sync.Mutex
	calls  []string
	status schema.Status
}

func (m *fakeMigrator) Up(_ context.Context, url string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "up "+url)
	m.status.Version, m.status.Applied = m.status.Latest, true
	return nil
}

func (m *fakeMigrator) Down(_ context.Context, url string, steps int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "down "+url+" "+string(rune('0'+steps)))
	return nil
}

func (m *fakeMigrator) Current(context.Context, string) (schema.Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status, nil
}

func TestMigrateRun(t *testing.T) {
	t.Parallel()
	const url = "postgres://owner@127.0.0.1/mcpd"
	m := &fakeMigrator{status: schema.Status{Latest: 4}}
	ts := newTestIO()
	opts := &migrateOptions{IO: ts.io, Migrator: m, DatabaseURL: url, Printer: &output.Printer{Out: ts.out, ErrOut: ts.errOut, Format: output.Table}}
	if err := migrateStatusRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if want := "version\t0\nlatest\t4\npending\t4\ndirty\tfalse\nengine\tpostgresql\n"; ts.out.String() != want {
		t.Fatalf("status before up:\n%q\nwant\n%q", ts.out, want)
	}
	ts.out.Reset()
	if err := migrateUpRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if want := "version\t4\nlatest\t4\npending\t0\ndirty\tfalse\nengine\tpostgresql\n"; ts.out.String() != want {
		t.Fatalf("status after up:\n%q\nwant\n%q", ts.out, want)
	}
	ts.out.Reset()
	opts.Printer.Format = output.JSON
	if err := migrateStatusRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"version\": 4,\n  \"latest\": 4,\n  \"dirty\": false,\n  \"applied\": true,\n  \"pending\": 0,\n  \"engine\": \"postgresql\"\n}\n"; ts.out.String() != want {
		t.Fatalf("status -o json:\n%s\nwant\n%s", ts.out, want)
	}
	ts.out.Reset()
	opts.Printer.Format, opts.VersionOnly = output.Table, true
	if err := migrateStatusRun(context.Background(), opts); err != nil || ts.out.String() != "4\n" {
		t.Fatalf("version printed %q (%v), want 4", ts.out, err)
	}

	// down without N or --all asks on a terminal; anything but yes stops.
	opts.VersionOnly, opts.Steps, opts.All = false, 0, false
	ts.in.WriteString("no\n")
	if err := migrateDownRun(context.Background(), opts); err == nil {
		t.Fatal("down went on without a yes")
	}
	ts.in.WriteString("yes\n")
	if err := migrateDownRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	opts.Steps = 2
	if err := migrateDownRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.calls, ";"); got != "up "+url+";down "+url+" 0;down "+url+" 2" {
		t.Fatalf("migrator calls %q", got)
	}
}

func TestMigrateDatabaseURLFromEnv(t *testing.T) {
	isolate(t)
	t.Setenv(EnvDatabaseURL, "postgres://env@127.0.0.1/mcpd")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "status"}, "postgres://env@127.0.0.1/mcpd"},
		{[]string{"migrate", "up", "--database-url", "postgres://flag@127.0.0.1/mcpd"}, "postgres://flag@127.0.0.1/mcpd"},
	} {
		f := testFactory(newTestIO(), nil)
		root := NewRootCmd(f)
		root.SetArgs(c.args)
		sub, _, err := root.Find(c.args)
		if err != nil {
			t.Fatal(err)
		}
		sub.RunE = func(*cobra.Command, []string) error { return nil }
		if _, err := root.ExecuteC(); err != nil {
			t.Fatal(err)
		}
		if cfg, _ := f.Config(); cfg == nil || cfg.DatabaseURL != c.want {
			t.Fatalf("%q: database URL %+v, want %s", c.args, cfg, c.want)
		}
	}
}
