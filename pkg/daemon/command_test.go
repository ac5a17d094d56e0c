package daemon_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"

	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
)

// load parses args as mcpd does and returns the configuration with env as
// the environment.
func load(t *testing.T, args []string, env map[string]string) (config.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("mcpd", pflag.ContinueOnError)
	daemon.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return daemon.LoadConfig(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "mcpd.yaml", `
listen: 127.0.0.1:1001
heartbeat-interval: 30s
monitor-period: 4s
log-level: warn
log-format: text
auth-jwt-secret-file: /file/secret
alertmanager-url: [http://file-am:9093]
dev: true
`)
	env := map[string]string{
		"MCPD_LISTEN":             "127.0.0.1:1002",
		"MCPD_HEARTBEAT_INTERVAL": "20s",
		"MCPD_LOG_LEVEL":          "error",
		"MCPD_ALERTMANAGER_URL":   "http://env-am-1:9093, http://env-am-2:9093",
	}

	cfg, err := load(t, []string{"--config", file, "--listen", "127.0.0.1:1003"}, env)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"flag beats env and file", cfg.Listen, "127.0.0.1:1003"},
		{"env beats file", cfg.HeartbeatInterval.String(), "20s"},
		{"env beats file (level)", cfg.LogLevel, "error"},
		{"file beats default", cfg.MonitorPeriod.String(), "4s"},
		{"file beats default (format)", cfg.LogFormat, "text"},
		{"file string", cfg.AuthJWTSecretFile, "/file/secret"},
		{"env list", strings.Join(cfg.AlertmanagerURLs, " "), "http://env-am-1:9093 http://env-am-2:9093"},
		{"default", cfg.RequestTimeout.String(), "5s"},
		{"file bool", boolString(cfg.Dev), "true"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}

	// Flags beat everything, for every kind of value.
	cfg, err = load(t, []string{"--config", file, "--heartbeat-interval", "1s", "--monitor-period=500ms",
		"--alertmanager-url", "http://flag-1", "--alertmanager-url", "http://flag-2,http://flag-3", "--dev=false",
		"--log-level", "debug"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HeartbeatInterval != time.Second || cfg.MonitorPeriod != 500*time.Millisecond || cfg.Dev ||
		cfg.LogLevel != "debug" || strings.Join(cfg.AlertmanagerURLs, " ") != "http://flag-1 http://flag-2 http://flag-3" {
		t.Fatalf("flags: %+v", cfg)
	}

	// MCPD_CONFIG names the file when --config is not given.
	cfg, err = load(t, nil, map[string]string{"MCPD_CONFIG": file})
	if err != nil || cfg.Listen != "127.0.0.1:1001" || cfg.HeartbeatInterval != 30*time.Second {
		t.Fatalf("MCPD_CONFIG: %+v %v", cfg, err)
	}

	// Nothing set: the defaults.
	cfg, err = load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	def := config.Default()
	if cfg.Listen != def.Listen || cfg.HeartbeatInterval != def.HeartbeatInterval || cfg.MonitorPeriod != def.MonitorPeriod ||
		cfg.LogFormat != def.LogFormat || cfg.LogLevel != def.LogLevel || cfg.ShutdownTimeout != def.ShutdownTimeout ||
		cfg.Dev || cfg.DatabaseURL != "" || cfg.AlertmanagerURLs != nil || !cfg.UI {
		t.Fatalf("defaults: %+v", cfg)
	}
}

// TestFlushIntervalFollowsShortInterval: with no flush window given, a
// heartbeat interval under 2s brings it down to a quarter of it; one given
// is kept, and cut to a quarter of the interval only when mcpd runs.
func TestFlushIntervalFollowsShortInterval(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args            []string
		want, effective time.Duration
	}{
		{nil, 500 * time.Millisecond, 500 * time.Millisecond},
		{[]string{"--heartbeat-interval", "200ms"}, 50 * time.Millisecond, 50 * time.Millisecond},
		{[]string{"--heartbeat-flush-interval", "1s"}, time.Second, time.Second},
		{[]string{"--heartbeat-interval", "1s", "--heartbeat-flush-interval", "600ms"}, 600 * time.Millisecond, 250 * time.Millisecond},
		{[]string{"--heartbeat-flush-interval", "0"}, 0, 0},
	}
	for _, c := range cases {
		cfg, err := load(t, append(c.args, "--dev"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HeartbeatFlushInterval != c.want || cfg.EffectiveHeartbeatFlushInterval() != c.effective {
			t.Fatalf("%v: flush window %s (effective %s), want %s (%s)", c.args, cfg.HeartbeatFlushInterval,
				cfg.EffectiveHeartbeatFlushInterval(), c.want, c.effective)
		}
	}
}

// TestMonitorPeriodFollowsShortInterval: with no monitor period given, a
// heartbeat interval under 10s brings the period down to half of it; one
// given explicitly is kept (and refused by Validate when too long).
func TestMonitorPeriodFollowsShortInterval(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{[]string{"--heartbeat-interval", "1s"}, nil, 500 * time.Millisecond},
		{nil, map[string]string{"MCPD_HEARTBEAT_INTERVAL": "200ms"}, 100 * time.Millisecond},
		{[]string{"--heartbeat-interval", "1m"}, nil, 5 * time.Second},
		{[]string{"--heartbeat-interval", "1s", "--monitor-period", "300ms"}, nil, 300 * time.Millisecond},
		{[]string{"--heartbeat-interval", "1s", "--monitor-period", "5s"}, nil, 5 * time.Second},
	}
	for _, c := range cases {
		cfg, err := load(t, append(c.args, "--dev"), c.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MonitorPeriod != c.want {
			t.Fatalf("%v %v: monitor period %s, want %s", c.args, c.env, cfg.MonitorPeriod, c.want)
		}
	}
}

func TestEveryFlagHasAnEnvVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"MCPD_LISTEN": "127.0.0.1:9", "MCPD_DATABASE_URL": "postgres://x@h/db", "MCPD_DEV": "true",
		"MCPD_HEARTBEAT_INTERVAL": "2s", "MCPD_MONITOR_PERIOD": "1s", "MCPD_REQUEST_TIMEOUT": "3s",
		"MCPD_HEARTBEAT_FLUSH_INTERVAL": "300ms",
		"MCPD_SHUTDOWN_TIMEOUT":         "4s", "MCPD_AUTH_JWT_SECRET_FILE": "/s", "MCPD_AUTH_JWKS_FILE": "/j",
		"MCPD_ALERTMANAGER_URL": "http://am", "MCPD_ALERT_WEBHOOK_URL": "http://hook",
		"MCPD_ALERT_WEBHOOK_SECRET_FILE": "/w", "MCPD_LOG_FORMAT": "text", "MCPD_LOG_LEVEL": "debug",
		"MCPD_BLIND_AFTER": "7s", "MCPD_MASS_LOSS_SHARE": "0.25", "MCPD_MASS_LOSS_MIN": "3",
		"MCPD_TLS_CERT_FILE": "/c", "MCPD_TLS_KEY_FILE": "/k", "MCPD_TLS_CLIENT_CA_FILE": "/ca",
		"MCPD_MAX_CONNECTIONS":    "500",
		"MCPD_TENANT_MAX_SERVERS": "0", "MCPD_TENANT_RATE_LIMIT": "2.5", "MCPD_TENANT_RATE_BURST": "9",
		"MCPD_TENANT_MAX_WATCHES": "7", "MCPD_REGISTRY_NAMESPACE": "com.example", "MCPD_UI": "false",
		"MCPD_MCP_MAX_SESSIONS": "50", "MCPD_MCP_MAX_SESSIONS_PER_SUBJECT": "5", "MCPD_CITUS_WORKER_READS": "false",
	}
	cfg, err := load(t, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Config{Listen: "127.0.0.1:9", DatabaseURL: "postgres://x@h/db", Dev: true,
		HeartbeatInterval: 2 * time.Second, MonitorPeriod: time.Second, RequestTimeout: 3 * time.Second,
		HeartbeatFlushInterval: 300 * time.Millisecond,
		ShutdownTimeout:        4 * time.Second, AuthJWTSecretFile: "/s", AuthJWKSFile: "/j",
		AlertmanagerURLs: []string{"http://am"}, AlertWebhookURL: "http://hook", AlertWebhookSecretFile: "/w",
		LogFormat: "text", LogLevel: "debug", BlindAfter: 7 * time.Second, MassLossShare: 0.25, MassLossMin: 3,
		TLSCertFile: "/c", TLSKeyFile: "/k", TLSClientCAFile: "/ca", MaxConnections: 500,
		TenantMaxServers: 0, TenantRateLimit: 2.5, TenantRateBurst: 9, TenantMaxWatches: 7,
		MCPMaxSessions: 50, MCPMaxSessionsPerSubject: 5, RegistryNamespace: "com.example"}
	if !equalConfig(cfg, want) {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
}

// The tenant limits come from flags, the environment and the file, with
// the contract's defaults.
func TestTenantLimitSettings(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, []string{"--dev"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TenantMaxServers != 10000 || cfg.TenantRateLimit != 2000 || cfg.TenantRateBurst != 4000 || cfg.TenantMaxWatches != 100 {
		t.Fatalf("defaults: %+v", cfg)
	}
	file := writeFile(t, "c.yaml", "tenant-max-servers: 50\ntenant-rate-limit: 10\ntenant-rate-burst: 20\ntenant-max-watches: 3\n")
	cfg, err = load(t, []string{"--dev", "--config", file, "--tenant-rate-burst", "30"}, map[string]string{"MCPD_TENANT_MAX_WATCHES": "4"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TenantMaxServers != 50 || cfg.TenantRateLimit != 10 || cfg.TenantRateBurst != 30 || cfg.TenantMaxWatches != 4 {
		t.Fatalf("file, flag and env: %+v", cfg)
	}
	if _, err := load(t, []string{"--dev"}, map[string]string{"MCPD_TENANT_RATE_LIMIT": "fast"}); err == nil ||
		!strings.Contains(err.Error(), "MCPD_TENANT_RATE_LIMIT") {
		t.Fatalf("MCPD_TENANT_RATE_LIMIT=fast: %v", err)
	}
}

// TestAdminListenSetting: --admin-listen, MCPD_ADMIN_LISTEN and the file's
// admin-listen key, off by default, host:port checked.
func TestAdminListenSetting(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, []string{"--dev"}, nil)
	if err != nil || cfg.AdminListen != "" {
		t.Fatalf("default: %q %v, want off", cfg.AdminListen, err)
	}
	file := writeFile(t, "c.yaml", "admin-listen: 127.0.0.1:9001\n")
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--dev", "--config", file}, nil, "127.0.0.1:9001"},
		{[]string{"--dev", "--config", file}, map[string]string{"MCPD_ADMIN_LISTEN": "127.0.0.1:9002"}, "127.0.0.1:9002"},
		{[]string{"--dev", "--config", file, "--admin-listen", ":9003"}, map[string]string{"MCPD_ADMIN_LISTEN": "127.0.0.1:9002"}, ":9003"},
	} {
		cfg, err := load(t, c.args, c.env)
		if err != nil || cfg.AdminListen != c.want {
			t.Fatalf("%v %v: %q %v, want %q", c.args, c.env, cfg.AdminListen, err, c.want)
		}
	}
	cfg, err = load(t, []string{"--dev", "--admin-listen", "9001"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--admin-listen") {
		t.Fatalf("--admin-listen 9001: %v, want an error naming it", err)
	}
}

// --ui is on by default; the flag, MCPD_UI and the file's ui key set it,
// in that order of precedence.
func TestUISetting(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "ui.yaml", "ui: false\n")
	cases := []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, true},
		{[]string{"--ui=false"}, nil, false},
		{nil, map[string]string{"MCPD_UI": "false"}, false},
		{[]string{"--config", file}, nil, false},
		{[]string{"--config", file}, map[string]string{"MCPD_UI": "true"}, true},
		{[]string{"--ui=true"}, map[string]string{"MCPD_UI": "false"}, true},
	}
	for _, c := range cases {
		cfg, err := load(t, append(c.args, "--dev"), c.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.UI != c.want {
			t.Errorf("%v %v: ui %v, want %v", c.args, c.env, cfg.UI, c.want)
		}
	}
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want string
	}{
		{"env duration", nil, map[string]string{"MCPD_HEARTBEAT_INTERVAL": "soon"}, "", `MCPD_HEARTBEAT_INTERVAL: "soon" is not a duration`},
		{"env bool", nil, map[string]string{"MCPD_DEV": "sure"}, "", `MCPD_DEV: "sure" is not a boolean`},
		{"file duration without unit", nil, nil, "heartbeat-interval: 10\n", "heartbeat-interval in "},
		{"file unknown key", nil, nil, "listen: 127.0.0.1:1\nheartbeat_interval: 10s\n", `unknown keys "heartbeat_interval"`},
		{"file not yaml", nil, nil, "listen: [\n", "not YAML"},
		{"file list of numbers", nil, nil, "alertmanager-url: [1]\n", "want a list of strings"},
		{"file missing", []string{"--config", "/nonexistent/mcpd.yaml"}, nil, "", "--config /nonexistent/mcpd.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.file != "" {
				args = append(args, "--config", writeFile(t, "c.yaml", c.file))
			}
			_, err := load(t, args, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want it to say %q", err, c.want)
			}
		})
	}
}

func TestRunFReceivesValidatedConfig(t *testing.T) {
	t.Parallel()
	var got config.Config
	var out, errOut bytes.Buffer
	cmd := daemon.NewCommand(&out, &errOut, func(_ context.Context, cfg config.Config) error { got = cfg; return nil })
	cmd.SetArgs([]string{"--dev", "--heartbeat-interval", "1s", "--monitor-period", "1s"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !got.Dev || got.HeartbeatInterval != time.Second {
		t.Fatalf("runF got %+v", got)
	}
}

// TestExitCodes runs Main as mcpd's main does: usage problems exit 2 with
// a message on stderr, a failure to start exits 1. It reads the process
// environment, so it does not run in parallel.
func TestExitCodes(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string // on stderr (stdout for exit 0)
	}{
		{"version", []string{"--version"}, nil, 0, "mcpd "},
		{"help", []string{"--help"}, nil, 0, "--heartbeat-interval"},
		{"unknown flag", []string{"--frobnicate"}, nil, 2, "unknown flag: --frobnicate"},
		{"bad flag duration", []string{"--dev", "--heartbeat-interval", "ten"}, nil, 2, "heartbeat-interval"},
		{"argument", []string{"--dev", "serve"}, nil, 2, `unexpected argument "serve"`},
		{"invalid config", []string{"--dev", "--monitor-period", "20s"}, nil, 2, "--monitor-period: 20s is longer"},
		{"flush window over 1s", []string{"--dev", "--heartbeat-flush-interval", "2s"}, nil, 2, "--heartbeat-flush-interval: 2s is longer than 1s"},
		{"negative flush window", []string{"--dev", "--heartbeat-flush-interval", "-1s"}, nil, 2, "--heartbeat-flush-interval: must be a positive duration"},
		{"flush window under 1ms", []string{"--dev", "--heartbeat-flush-interval", "1ns"}, nil, 2, "--heartbeat-flush-interval: 1ns is shorter than 1ms"},
		{"period over short interval", []string{"--dev", "--heartbeat-interval", "1s", "--monitor-period", "5s"}, nil, 2, "--monitor-period: 5s is longer"},
		{"zero interval", []string{"--dev", "--heartbeat-interval", "0s"}, nil, 2, "--heartbeat-interval: must be a positive"},
		{"no store", nil, nil, 2, "--database-url: required"},
		{"bad log format", []string{"--dev", "--log-format", "xml"}, nil, 2, "--log-format"},
		{"bad env", []string{"--dev"}, map[string]string{"MCPD_MONITOR_PERIOD": "fast"}, 2, "MCPD_MONITOR_PERIOD"},
		{"tls cert without key", []string{"--dev", "--tls-cert-file", "/c"}, nil, 2, "--tls-cert-file and --tls-key-file: give both or neither"},
		{"client ca without tls", []string{"--dev", "--tls-client-ca-file", "/ca"}, nil, 2, "--tls-client-ca-file: needs"},
		{"zero max connections", []string{"--dev", "--max-connections", "0"}, nil, 2, "--max-connections: 0 is not"},
		{"max connections over the file limit", []string{"--dev", "--max-connections", "2000000000"}, nil, 2, "--max-connections 2000000000 does not fit"},
		{"tls file missing", []string{"--dev", "--tls-cert-file", "/nonexistent/c", "--tls-key-file", "/nonexistent/k"}, nil, 1, "/nonexistent/c"},
		{"port in use", []string{"--dev", "--listen", busy.Addr().String()}, nil, 1, "listen on " + busy.Addr().String()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var out, errOut bytes.Buffer
			code := daemon.Main(context.Background(), c.args, &out, &errOut, nil)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, c.code, out.String(), errOut.String())
			}
			where := errOut.String()
			if c.code == 0 {
				where = out.String()
			}
			if !strings.Contains(where, c.want) {
				t.Fatalf("output %q lacks %q", where, c.want)
			}
		})
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func equalConfig(a, b config.Config) bool { return reflect.DeepEqual(a, b) }

// --registry-namespace: flag, MCPD_REGISTRY_NAMESPACE, the file's key, and
// local.mcpd by default; one that cannot start a server.json name is bad.
func TestRegistryNamespace(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, nil, nil)
	if err != nil || cfg.RegistryNamespace != "local.mcpd" {
		t.Fatalf("default %q, %v", cfg.RegistryNamespace, err)
	}
	file := writeFile(t, "ns.yaml", "registry-namespace: io.file\n")
	cfg, err = load(t, []string{"--config", file}, nil)
	if err != nil || cfg.RegistryNamespace != "io.file" {
		t.Fatalf("file %q, %v", cfg.RegistryNamespace, err)
	}
	cfg, err = load(t, []string{"--config", file, "--registry-namespace", "io.flag"}, map[string]string{"MCPD_REGISTRY_NAMESPACE": "io.env"})
	if err != nil || cfg.RegistryNamespace != "io.flag" {
		t.Fatalf("flag %q, %v", cfg.RegistryNamespace, err)
	}
	cfg.Dev = true
	for _, bad := range []string{"", "local/mcpd", "a b", strings.Repeat("a", 101)} {
		cfg.RegistryNamespace = bad
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--registry-namespace") {
			t.Errorf("namespace %q: %v, want an error naming --registry-namespace", bad, err)
		}
	}
}

// TestEverySettingPrecedence: every setting of config.Settings is a flag,
// an environment variable and a file key, and a flag beats the
// environment, which beats the file, which beats the default.
func TestEverySettingPrecedence(t *testing.T) {
	t.Parallel()
	for _, st := range config.Settings {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			// The values of the file, the environment and the flag.
			var file, env, flag string
			switch st.Field(&config.Config{}).(type) {
			case *string:
				file, env, flag = "from-file", "from-env", "from-flag"
			case *bool:
				file, env, flag = "true", "false", "true"
			case *time.Duration:
				file, env, flag = "11s", "12s", "13s"
			case *float64:
				file, env, flag = "0.11", "0.12", "0.13"
			case *int:
				file, env, flag = "11", "12", "13"
			case *[]string:
				file, env, flag = "http://file", "http://env", "http://flag"
			default:
				t.Fatalf("a setting of type %T", st.Field(&config.Config{}))
			}
			got := func(args []string, envs map[string]string) any {
				t.Helper()
				cfg, err := load(t, args, envs)
				if err != nil {
					t.Fatal(err)
				}
				return reflect.ValueOf(st.Field(&cfg)).Elem().Interface()
			}
			want := func(s string) any {
				t.Helper()
				cfg, err := load(t, []string{"--" + st.Name + "=" + s}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return reflect.ValueOf(st.Field(&cfg)).Elem().Interface()
			}
			def := config.Default()
			if g, w := got(nil, nil), reflect.ValueOf(st.Field(&def)).Elem().Interface(); !reflect.DeepEqual(g, w) {
				t.Errorf("nothing given: %v, want the default %v", g, w)
			}
			path := writeFile(t, "mcpd.yaml", st.Name+": "+file+"\n")
			name := config.EnvName(st.Name)
			if g, w := got([]string{"--config", path}, nil), want(file); !reflect.DeepEqual(g, w) {
				t.Errorf("file: %v, want %v", g, w)
			}
			if g, w := got([]string{"--config", path}, map[string]string{name: env}), want(env); !reflect.DeepEqual(g, w) {
				t.Errorf("file and %s: %v, want %v", name, g, w)
			}
			args := []string{"--config", path, "--" + st.Name + "=" + flag}
			if g, w := got(args, map[string]string{name: env}), want(flag); !reflect.DeepEqual(g, w) {
				t.Errorf("file, %s and flag: %v, want %v", name, g, w)
			}
		})
	}
}

// --registry-public-tenant: flag, MCPD_REGISTRY_PUBLIC_TENANT, the file's
// key, empty by default (no public view); what is not a tenant UUID is bad.
func TestRegistryPublicTenant(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, nil, nil)
	if err != nil || cfg.RegistryPublicTenant != "" || cfg.PublicTenant() != uuid.Nil {
		t.Fatalf("default %q, %v", cfg.RegistryPublicTenant, err)
	}
	id := uuid.New()
	file := writeFile(t, "pub.yaml", "registry-public-tenant: "+uuid.NewString()+"\n")
	cfg, err = load(t, []string{"--config", file, "--registry-public-tenant", id.String()},
		map[string]string{"MCPD_REGISTRY_PUBLIC_TENANT": uuid.NewString()})
	if err != nil || cfg.PublicTenant() != id {
		t.Fatalf("flag %q, %v", cfg.RegistryPublicTenant, err)
	}
	cfg.Dev = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a UUID: %v", err)
	}
	for _, bad := range []string{"tenant", uuid.Nil.String(), "{" + id.String() + "}", "urn:uuid:" + id.String(), id.String()[:35]} {
		cfg.RegistryPublicTenant = bad
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--registry-public-tenant") {
			t.Errorf("public tenant %q: %v, want an error naming --registry-public-tenant", bad, err)
		}
	}
}
