package config

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/registry"
)

// Names of the settings: each is a flag (--listen), an environment variable
// (MCPD_LISTEN: MCPD_ and the name upper-cased, dashes to underscores) and a
// key of the YAML config file.
const (
	KeyListen                 = "listen"
	KeyAdminListen            = "admin-listen"
	KeyDatabaseURL            = "database-url"
	KeyDev                    = "dev"
	KeyHeartbeatInterval      = "heartbeat-interval"
	KeyMonitorPeriod          = "monitor-period"
	KeyHeartbeatFlushInterval = "heartbeat-flush-interval"
	KeyRequestTimeout         = "request-timeout"
	KeyShutdownTimeout        = "shutdown-timeout"
	KeyAuthJWTSecretFile      = "auth-jwt-secret-file"
	KeyAuthJWKSFile           = "auth-jwks-file"
	KeyAlertmanagerURL        = "alertmanager-url"
	KeyAlertWebhookURL        = "alert-webhook-url"
	KeyAlertWebhookSecretFile = "alert-webhook-secret-file"
	KeyLogFormat              = "log-format"
	KeyLogLevel               = "log-level"
	KeyBlindAfter             = "blind-after"
	KeyMassLossShare          = "mass-loss-share"
	KeyMassLossMin            = "mass-loss-min"
	KeyTLSCertFile            = "tls-cert-file"
	KeyTLSKeyFile             = "tls-key-file"
	KeyTLSClientCAFile        = "tls-client-ca-file"
	KeyMaxConnections         = "max-connections"
	KeyTenantMaxServers       = "tenant-max-servers"
	KeyTenantRateLimit        = "tenant-rate-limit"
	KeyTenantRateBurst        = "tenant-rate-burst"
	KeyTenantMaxWatches       = "tenant-max-watches"
	KeyMCPMaxSessions         = "mcp-max-sessions"
	KeyMCPMaxSessionsPerSub   = "mcp-max-sessions-per-subject"
	KeyRegistryNamespace      = "registry-namespace"
	KeyRegistryPublicTenant   = "registry-public-tenant"
	KeyUI                     = "ui"
	KeyCitusWorkerReads       = "citus-worker-reads"
)

// EnvPrefix starts the name of every environment variable of mcpd.
const EnvPrefix = "MCPD"

// EnvName returns the environment variable of the setting key.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// Defaults of the settings that have one.
const (
	DefaultListen          = "127.0.0.1:8420"
	DefaultRequestTimeout  = 5 * time.Second
	DefaultShutdownTimeout = 15 * time.Second
	DefaultLogFormat       = "json"
	DefaultLogLevel        = "info"
	// DefaultMaxConnections fits the systemd unit's LimitNOFILE=65536 with
	// room left for the database pool, log and key files and alert
	// deliveries.
	DefaultMaxConnections = 60000
	// The per-tenant limits (of one mcpd process). The rate keeps room
	// for a fleet that keeps the contract: 10,000 servers of a tenant
	// heartbeating every 10 s make 1,000 calls per second.
	DefaultTenantMaxServers = 10000
	DefaultTenantRateLimit  = 2000
	DefaultTenantRateBurst  = 4000
	DefaultTenantMaxWatches = 100
	// The bounds of /mcp's 2025-11-25 sessions (of one mcpd process): a
	// tenant's, and one token subject's of a tenant.
	DefaultMCPMaxSessions           = 1000
	DefaultMCPMaxSessionsPerSubject = 100
	// DefaultRegistryNamespace is the namespace of the MCP registry API's
	// server names ("local.mcpd/calendar").
	DefaultRegistryNamespace = "local.mcpd"
)

// registryNamespaceRE is a namespace with which every registry name
// matches server.json's name pattern.
var registryNamespaceRE = regexp.MustCompile(`^[a-zA-Z0-9.-]{1,100}$`)

// Log formats and levels.
var (
	LogFormats = []string{"json", "text"}
	LogLevels  = []string{"debug", "info", "warn", "error"}
)

// Config is everything mcpd is started with.
type Config struct {
	// Listen is the host:port of the HTTP API.
	Listen string
	// AdminListen, when set, is the host:port of a second, plain HTTP
	// listener that serves /healthz, /readyz and /metrics only, so that
	// probes never wait behind API connections. "": none.
	AdminListen string
	// DatabaseURL is the PostgreSQL URL (or keyword/value DSN) of the store.
	DatabaseURL string
	// Dev runs on an in-memory store with a fresh secret and a demo token.
	Dev bool
	// HeartbeatInterval is how often servers are expected to heartbeat.
	HeartbeatInterval time.Duration
	// MonitorPeriod is how often the monitor sweeps; at most the interval.
	MonitorPeriod time.Duration
	// HeartbeatFlushInterval is the window in which heartbeats held in
	// memory are written: at most MaxHeartbeatFlushInterval and a quarter
	// of the interval; zero: no heartbeat is held, each is written before
	// it is answered.
	HeartbeatFlushInterval time.Duration
	// RequestTimeout bounds the work of one API call.
	RequestTimeout time.Duration
	// ShutdownTimeout bounds the drain of in-flight requests on stop.
	ShutdownTimeout time.Duration
	// AuthJWTSecretFile holds the HS256 secret.
	AuthJWTSecretFile string
	// AuthJWKSFile holds the public keys for RS256, ES256 and EdDSA tokens.
	AuthJWKSFile string
	// AlertmanagerURLs are Alertmanager base URLs (v2 API) to alert.
	AlertmanagerURLs []string
	// AlertWebhookURL receives alerts as JSON.
	AlertWebhookURL string
	// AlertWebhookSecretFile holds the secret that signs webhook bodies.
	AlertWebhookSecretFile string
	// LogFormat is json or text.
	LogFormat string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// BlindAfter is the gap between successful sweeps after which the
	// registry counts as having been blind, so that no server pays for it:
	// 0 means two monitor periods and at least one interval; negative
	// turns the protection off.
	BlindAfter time.Duration
	// MassLossShare and MassLossMin: more than this share of a tenant's
	// live servers, and at least this many, going unhealthy in one sweep
	// raise MCPRegistryMassHeartbeatLoss.
	MassLossShare float64
	MassLossMin   int
	// TLSCertFile and TLSKeyFile, both or neither, make the API listen for
	// HTTPS only (PEM certificate chain and private key).
	TLSCertFile string
	TLSKeyFile  string
	// TLSClientCAFile holds the PEM certificates of the CAs that sign the
	// client certificates every connection must present (mTLS).
	TLSClientCAFile string
	// MaxConnections caps the API's open connections; more wait in the
	// kernel's backlog.
	MaxConnections int
	// TenantMaxServers is the most servers that are not deregistered a
	// tenant may have; a new module past it is refused. 0: no quota.
	TenantMaxServers int
	// TenantRateLimit is the API requests per second of one tenant, and
	// TenantRateBurst how many it may make at once; 0 rate: no limit.
	TenantRateLimit float64
	TenantRateBurst int
	// TenantMaxWatches is the most concurrent watch streams of a tenant;
	// 0: no limit.
	TenantMaxWatches int
	// MCPMaxSessions is the most open 2025-11-25 /mcp sessions of a
	// tenant, and MCPMaxSessionsPerSubject of one token subject of a
	// tenant (0: only the tenant's bound).
	MCPMaxSessions           int
	MCPMaxSessionsPerSubject int
	// RegistryNamespace is the namespace of the server names of the MCP
	// registry API (/v0.1): "<namespace>/<module_name>".
	RegistryNamespace string
	// RegistryPublicTenant, a tenant UUID, is the tenant that a GET on the
	// MCP registry API (/v0.1) without an Authorization header reads;
	// empty: such a GET is 401.
	RegistryPublicTenant string
	// UI serves the read-only web board at /ui/.
	UI bool
	// CitusWorkerReads makes mcpd on Citus read tenants' positions and
	// change feed on each tenant's worker when it can reach it; false:
	// every read goes through the coordinator.
	CitusWorkerReads bool
}

// PublicTenant returns RegistryPublicTenant as a UUID, uuid.Nil when it is
// empty (or not valid: Validate refuses that).
func (c Config) PublicTenant() uuid.UUID {
	id, err := uuid.Parse(c.RegistryPublicTenant)
	if err != nil {
		return uuid.Nil
	}
	return id
}

// DefaultMonitorPeriodFor is the monitor period when none is given: the
// default 5 s, or half the heartbeat interval when that is shorter, so that
// a short interval (--heartbeat-interval 1s) needs no --monitor-period.
func DefaultMonitorPeriodFor(interval time.Duration) time.Duration {
	if half := interval / 2; half > 0 && half < registry.DefaultMonitorPeriod {
		return half
	}
	return registry.DefaultMonitorPeriod
}

// Bounds of the heartbeat flush window (contract).
const (
	DefaultHeartbeatFlushInterval = 500 * time.Millisecond
	MaxHeartbeatFlushInterval     = time.Second
)

// DefaultHeartbeatFlushIntervalFor is the flush window when none is given:
// the default 500 ms, or a quarter of the heartbeat interval when that is
// shorter (--heartbeat-interval 200ms writes every 50 ms).
func DefaultHeartbeatFlushIntervalFor(interval time.Duration) time.Duration {
	if q := interval / 4; q > 0 && q < DefaultHeartbeatFlushInterval {
		return q
	}
	return DefaultHeartbeatFlushInterval
}

// EffectiveHeartbeatFlushInterval is the flush window mcpd runs with: the
// configured one, at most a quarter of the heartbeat interval.
func (c Config) EffectiveHeartbeatFlushInterval() time.Duration {
	if q := c.HeartbeatInterval / 4; q > 0 && c.HeartbeatFlushInterval > q {
		return q
	}
	return c.HeartbeatFlushInterval
}

// Default returns the configuration with every default set.
func Default() Config {
	return Config{
		Listen:                   DefaultListen,
		HeartbeatInterval:        registry.DefaultHeartbeatInterval,
		MonitorPeriod:            registry.DefaultMonitorPeriod,
		HeartbeatFlushInterval:   DefaultHeartbeatFlushInterval,
		RequestTimeout:           DefaultRequestTimeout,
		ShutdownTimeout:          DefaultShutdownTimeout,
		LogFormat:                DefaultLogFormat,
		LogLevel:                 DefaultLogLevel,
		MassLossShare:            lifecycle.DefaultMassLossShare,
		MassLossMin:              lifecycle.DefaultMassLossMin,
		MaxConnections:           DefaultMaxConnections,
		TenantMaxServers:         DefaultTenantMaxServers,
		TenantRateLimit:          DefaultTenantRateLimit,
		TenantRateBurst:          DefaultTenantRateBurst,
		TenantMaxWatches:         DefaultTenantMaxWatches,
		MCPMaxSessions:           DefaultMCPMaxSessions,
		MCPMaxSessionsPerSubject: DefaultMCPMaxSessionsPerSubject,
		RegistryNamespace:        DefaultRegistryNamespace,
		UI:                       true,
		CitusWorkerReads:         true,
	}
}

// Validate reports every setting that mcpd cannot start with, each naming
// its flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", key, fmt.Sprintf(format, args...)))
	}

	if err := validListen(c.Listen); err != nil {
		bad(KeyListen, "%v", err)
	}
	if c.AdminListen != "" {
		if err := validListen(c.AdminListen); err != nil {
			bad(KeyAdminListen, "%v", err)
		}
	}
	if !(c.MassLossShare > 0 && c.MassLossShare <= 1) { // NaN too
		bad(KeyMassLossShare, "%v is not a share in (0, 1]", c.MassLossShare)
	}
	if c.MassLossMin < 1 {
		bad(KeyMassLossMin, "%d is not a positive number of servers", c.MassLossMin)
	}
	if c.TenantMaxServers < 0 {
		bad(KeyTenantMaxServers, "%d is negative (0 for no quota)", c.TenantMaxServers)
	}
	if c.TenantRateLimit < 0 || math.IsNaN(c.TenantRateLimit) || math.IsInf(c.TenantRateLimit, 0) {
		bad(KeyTenantRateLimit, "%v is not a rate in requests per second (0 for no limit)", c.TenantRateLimit)
	}
	if c.TenantRateBurst < 0 || (c.TenantRateLimit > 0 && c.TenantRateBurst < 1) {
		bad(KeyTenantRateBurst, "%d: want at least 1 request with --%s set", c.TenantRateBurst, KeyTenantRateLimit)
	}
	if c.TenantMaxWatches < 0 {
		bad(KeyTenantMaxWatches, "%d is negative (0 for no limit)", c.TenantMaxWatches)
	}
	if c.MCPMaxSessions < 1 {
		bad(KeyMCPMaxSessions, "%d is not a positive number of sessions", c.MCPMaxSessions)
	}
	if c.MCPMaxSessionsPerSubject < 0 {
		bad(KeyMCPMaxSessionsPerSub, "%d is negative (0 for only --%s)", c.MCPMaxSessionsPerSubject, KeyMCPMaxSessions)
	}
	if !registryNamespaceRE.MatchString(c.RegistryNamespace) {
		bad(KeyRegistryNamespace, "%q: want 1-100 of [a-zA-Z0-9.-], as in reverse DNS (local.mcpd, com.example)", c.RegistryNamespace)
	}
	if c.RegistryPublicTenant != "" {
		if id, err := uuid.Parse(c.RegistryPublicTenant); err != nil || id == uuid.Nil ||
			len(c.RegistryPublicTenant) != len(id.String()) {
			bad(KeyRegistryPublicTenant, "%q is not a tenant id: want a UUID such as 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c", c.RegistryPublicTenant)
		}
	}
	switch {
	case c.Dev && c.DatabaseURL != "":
		bad(KeyDatabaseURL, "not used with --dev, which keeps everything in memory: give one of them")
	case !c.Dev && c.DatabaseURL == "":
		bad(KeyDatabaseURL, "required (or --dev for an in-memory store)")
	case c.DatabaseURL != "":
		if _, err := pgconn.ParseConfig(c.DatabaseURL); err != nil {
			bad(KeyDatabaseURL, "not a PostgreSQL URL or DSN")
		}
	}
	if !c.Dev && c.AuthJWTSecretFile == "" && c.AuthJWKSFile == "" {
		errs = append(errs, fmt.Errorf("--%s or --%s: one is required to verify tokens (or --dev)",
			KeyAuthJWTSecretFile, KeyAuthJWKSFile))
	}

	positive := func(key string, d time.Duration) bool {
		if d <= 0 {
			bad(key, "must be a positive duration, like 10s; got %s", d)
			return false
		}
		return true
	}
	intervalOK := positive(KeyHeartbeatInterval, c.HeartbeatInterval)
	periodOK := positive(KeyMonitorPeriod, c.MonitorPeriod)
	if intervalOK && periodOK && c.MonitorPeriod > c.HeartbeatInterval {
		bad(KeyMonitorPeriod, "%s is longer than --%s %s: a sweep must come at least once per interval",
			c.MonitorPeriod, KeyHeartbeatInterval, c.HeartbeatInterval)
	}
	// Zero turns holding off; past a quarter of the interval it is cut to
	// that, with a warning (EffectiveHeartbeatFlushInterval).
	switch {
	case c.HeartbeatFlushInterval < 0:
		bad(KeyHeartbeatFlushInterval, "must be a positive duration, like 500ms, or 0 to write every heartbeat before it is answered; got %s",
			c.HeartbeatFlushInterval)
	case c.HeartbeatFlushInterval > 0 && c.HeartbeatFlushInterval < time.Millisecond:
		bad(KeyHeartbeatFlushInterval, "%s is shorter than 1ms: a flush that often only spins (0 writes every heartbeat before it is answered)",
			c.HeartbeatFlushInterval)
	case c.HeartbeatFlushInterval > MaxHeartbeatFlushInterval:
		bad(KeyHeartbeatFlushInterval, "%s is longer than %s: a crash may lose at most that window",
			c.HeartbeatFlushInterval, MaxHeartbeatFlushInterval)
	}
	positive(KeyRequestTimeout, c.RequestTimeout)
	positive(KeyShutdownTimeout, c.ShutdownTimeout)

	for _, u := range c.AlertmanagerURLs {
		if err := validHTTPURL(u); err != nil {
			bad(KeyAlertmanagerURL, "%q: %v", u, err)
		}
	}
	if c.AlertWebhookURL != "" {
		if err := validHTTPURL(c.AlertWebhookURL); err != nil {
			bad(KeyAlertWebhookURL, "%q: %v", c.AlertWebhookURL, err)
		}
	}
	if c.AlertWebhookSecretFile != "" && c.AlertWebhookURL == "" {
		bad(KeyAlertWebhookSecretFile, "needs --%s", KeyAlertWebhookURL)
	}

	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, fmt.Errorf("--%s and --%s: give both or neither", KeyTLSCertFile, KeyTLSKeyFile))
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		bad(KeyTLSClientCAFile, "needs --%s and --%s: client certificates are asked for over TLS only",
			KeyTLSCertFile, KeyTLSKeyFile)
	}
	if c.MaxConnections < 1 {
		bad(KeyMaxConnections, "%d is not a positive number of connections", c.MaxConnections)
	}

	if !slices.Contains(LogFormats, c.LogFormat) {
		bad(KeyLogFormat, "%q: want one of %s", c.LogFormat, strings.Join(LogFormats, ", "))
	}
	if !slices.Contains(LogLevels, c.LogLevel) {
		bad(KeyLogLevel, "%q: want one of %s", c.LogLevel, strings.Join(LogLevels, ", "))
	}
	return errors.Join(errs...)
}

// SlogLevel returns LogLevel as a slog level (info for anything unknown).
func (c Config) SlogLevel() slog.Level {
	switch c.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

func validListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

func validHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("want an http or https URL")
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	return nil
}
