package config_test

import (
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/config"
)

func valid() config.Config {
	c := config.Default()
	c.DatabaseURL = "postgres://mcpd@127.0.0.1:5432/mcpd?sslmode=disable"
	c.AuthJWTSecretFile = "/etc/mcpd/jwt.secret"
	return c
}

func TestDefaults(t *testing.T) {
	d := config.Default()
	if d.Listen != "127.0.0.1:8420" || d.HeartbeatInterval != 10*time.Second || d.MonitorPeriod != 5*time.Second ||
		d.RequestTimeout != 5*time.Second || d.LogFormat != "json" || d.LogLevel != "info" {
		t.Fatalf("defaults %+v", d)
	}
	if d.TenantMaxServers != 10000 || d.TenantRateLimit != 2000 || d.TenantRateBurst != 4000 || d.TenantMaxWatches != 100 {
		t.Fatalf("tenant limits %+v, want the contract's 10000, 2000/s, 4000, 100", d)
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	dev := config.Default()
	dev.Dev = true
	if err := dev.Validate(); err != nil {
		t.Fatalf("--dev alone: %v", err)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*config.Config)
		want   string // a part of the message
	}{
		{"no store", func(c *config.Config) { c.DatabaseURL = "" }, "--database-url: required"},
		{"dev and database", func(c *config.Config) { c.Dev = true }, "--database-url: not used with --dev"},
		{"bad database url", func(c *config.Config) { c.DatabaseURL = "postgres://[::1" }, "--database-url: not a PostgreSQL URL"},
		{"no keys", func(c *config.Config) { c.AuthJWTSecretFile = "" }, "--auth-jwt-secret-file or --auth-jwks-file"},
		{"zero interval", func(c *config.Config) { c.HeartbeatInterval = 0 }, "--heartbeat-interval: must be a positive"},
		{"negative interval", func(c *config.Config) { c.HeartbeatInterval = -time.Second }, "--heartbeat-interval"},
		{"zero period", func(c *config.Config) { c.MonitorPeriod = 0 }, "--monitor-period: must be a positive"},
		{"period over interval", func(c *config.Config) { c.MonitorPeriod = 11 * time.Second }, "--monitor-period: 11s is longer"},
		{"zero request timeout", func(c *config.Config) { c.RequestTimeout = 0 }, "--request-timeout"},
		{"zero shutdown timeout", func(c *config.Config) { c.ShutdownTimeout = 0 }, "--shutdown-timeout"},
		{"listen no port", func(c *config.Config) { c.Listen = "127.0.0.1" }, "--listen"},
		{"listen bad port", func(c *config.Config) { c.Listen = "127.0.0.1:http-ish" }, "--listen"},
		{"listen port too big", func(c *config.Config) { c.Listen = ":70000" }, "--listen"},
		{"alertmanager ftp", func(c *config.Config) { c.AlertmanagerURLs = []string{"http://am:9093", "ftp://am"} }, "--alertmanager-url: \"ftp://am\""},
		{"alertmanager no host", func(c *config.Config) { c.AlertmanagerURLs = []string{"http://"} }, "--alertmanager-url"},
		{"webhook not a url", func(c *config.Config) { c.AlertWebhookURL = "hooks.example" }, "--alert-webhook-url"},
		{"webhook secret alone", func(c *config.Config) { c.AlertWebhookSecretFile = "/s" }, "--alert-webhook-secret-file: needs"},
		{"log format", func(c *config.Config) { c.LogFormat = "xml" }, "--log-format: \"xml\""},
		{"log level", func(c *config.Config) { c.LogLevel = "verbose" }, "--log-level: \"verbose\""},
		{"tls cert alone", func(c *config.Config) { c.TLSCertFile = "/c" }, "--tls-cert-file and --tls-key-file: give both or neither"},
		{"tls key alone", func(c *config.Config) { c.TLSKeyFile = "/k" }, "--tls-cert-file and --tls-key-file"},
		{"client ca without tls", func(c *config.Config) { c.TLSClientCAFile = "/ca" }, "--tls-client-ca-file: needs"},
		{"no connections", func(c *config.Config) { c.MaxConnections = 0 }, "--max-connections: 0 is not"},
		{"negative quota", func(c *config.Config) { c.TenantMaxServers = -1 }, "--tenant-max-servers: -1 is negative"},
		{"negative rate", func(c *config.Config) { c.TenantRateLimit = -5 }, "--tenant-rate-limit: -5"},
		{"rate NaN", func(c *config.Config) { c.TenantRateLimit = math.NaN() }, "--tenant-rate-limit: NaN"},
		{"mass-loss share over 1", func(c *config.Config) { c.MassLossShare = 1.5 }, "--mass-loss-share: 1.5"},
		// NaN compares false both ways: a check written as x <= 0 || x > 1
		// let it through, and no mass loss was ever more than NaN.
		{"mass-loss share NaN", func(c *config.Config) { c.MassLossShare = math.NaN() }, "--mass-loss-share: NaN"},
		{"rate without burst", func(c *config.Config) { c.TenantRateBurst = 0 }, "--tenant-rate-burst: 0"},
		{"negative watches", func(c *config.Config) { c.TenantMaxWatches = -1 }, "--tenant-max-watches"},
		{"no mcp sessions", func(c *config.Config) { c.MCPMaxSessions = 0 }, "--mcp-max-sessions: 0 is not"},
		{"negative mcp sessions per subject", func(c *config.Config) { c.MCPMaxSessionsPerSubject = -1 }, "--mcp-max-sessions-per-subject: -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := valid()
			c.mutate(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want it to say %q", err, c.want)
			}
		})
	}

	t.Run("every problem at once", func(t *testing.T) {
		cfg := valid()
		cfg.LogFormat, cfg.LogLevel, cfg.HeartbeatInterval = "xml", "loud", 0
		if got := strings.Count(cfg.Validate().Error(), "\n") + 1; got != 3 {
			t.Fatalf("%d problems reported, want 3: %v", got, cfg.Validate())
		}
	})

	t.Run("accepted", func(t *testing.T) {
		for _, mutate := range []func(*config.Config){
			func(c *config.Config) { c.MonitorPeriod = c.HeartbeatInterval },
			func(c *config.Config) { c.Listen = ":0" },
			func(c *config.Config) { c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = "/c", "/k", "/ca" },
			func(c *config.Config) { c.Listen = "[::1]:8420" },
			func(c *config.Config) { c.DatabaseURL = "host=/run/postgresql dbname=mcpd" },
			func(c *config.Config) { c.AuthJWTSecretFile, c.AuthJWKSFile = "", "/etc/mcpd/jwks.json" },
			func(c *config.Config) {
				c.AlertmanagerURLs = []string{"https://am-1:9093", "http://am-2:9093/prefix"}
				c.AlertWebhookURL, c.AlertWebhookSecretFile = "https://hooks.example/mcpd", "/etc/mcpd/webhook.secret"
			},
		} {
			cfg := valid()
			mutate(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("%+v: %v", cfg, err)
			}
		}
	})
}

func TestEnvNameAndLevel(t *testing.T) {
	if got := config.EnvName(config.KeyAuthJWTSecretFile); got != "MCPD_AUTH_JWT_SECRET_FILE" {
		t.Fatalf("EnvName = %q", got)
	}
	for level, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo,
		"warn": slog.LevelWarn, "error": slog.LevelError} {
		if got := (config.Config{LogLevel: level}).SlogLevel(); got != want {
			t.Fatalf("%s: %v", level, got)
		}
	}
}
