package config

// Setting is one setting of mcpd, declared once: its Name is the flag
// (--name), the environment variable (EnvName) and the key of the YAML
// file; its default is Default's; Field points at it in a Config, and its
// type decides how it is parsed (string, bool, time.Duration, float64,
// int, []string). Adding a setting is a field of Config, its default in
// Default when not the zero value, and one entry of Settings.
type Setting struct {
	Name  string
	Usage string
	Field func(c *Config) any
}

// Settings lists every setting of mcpd, in the order --help shows them.
var Settings = []Setting{
	{KeyListen, "host:port of the HTTP API", func(c *Config) any { return &c.Listen }},
	{KeyAdminListen, "host:port of a plain HTTP listener for /healthz, /readyz and /metrics only, so that probes never wait behind API connections (default off)", func(c *Config) any { return &c.AdminListen }},
	{KeyDatabaseURL, "PostgreSQL URL of the store (required unless --dev)", func(c *Config) any { return &c.DatabaseURL }},
	{KeyDev, "in-memory store, fresh HS256 secret, prints a ready demo token", func(c *Config) any { return &c.Dev }},
	{KeyHeartbeatInterval, "heartbeat interval I: degraded after 2I of silence, unhealthy after 3I", func(c *Config) any { return &c.HeartbeatInterval }},
	{KeyMonitorPeriod, "how often the monitor sweeps (at most the heartbeat interval)", func(c *Config) any { return &c.MonitorPeriod }},
	{KeyHeartbeatFlushInterval, "window in which heartbeats of healthy servers, answered from memory, are written to the store (at most 1s and a quarter of the heartbeat interval; 0: every heartbeat is written before it is answered); transitions are always written before they are answered", func(c *Config) any { return &c.HeartbeatFlushInterval }},
	{KeyRequestTimeout, "deadline of one API call; past it the call answers 503", func(c *Config) any { return &c.RequestTimeout }},
	{KeyShutdownTimeout, "how long a stop waits for in-flight requests", func(c *Config) any { return &c.ShutdownTimeout }},
	{KeyAuthJWTSecretFile, "file holding the HS256 secret (at least 32 bytes)", func(c *Config) any { return &c.AuthJWTSecretFile }},
	{KeyAuthJWKSFile, "JWKS file with the public keys for RS256, ES256 and EdDSA tokens", func(c *Config) any { return &c.AuthJWKSFile }},
	{KeyAlertmanagerURL, "Alertmanager base URL (repeatable, or a comma-separated list)", func(c *Config) any { return &c.AlertmanagerURLs }},
	{KeyAlertWebhookURL, "URL that receives alerts as JSON", func(c *Config) any { return &c.AlertWebhookURL }},
	{KeyAlertWebhookSecretFile, "file holding the secret that signs webhook bodies", func(c *Config) any { return &c.AlertWebhookSecretFile }},
	{KeyLogFormat, "log format: json or text", func(c *Config) any { return &c.LogFormat }},
	{KeyLogLevel, "log level: debug, info, warn or error", func(c *Config) any { return &c.LogLevel }},
	{KeyBlindAfter, "gap between successful sweeps after which the registry counts as blind and no server pays for it (0: max(2 monitor periods, interval); negative: off)", func(c *Config) any { return &c.BlindAfter }},
	{KeyMassLossShare, "share of a tenant's live servers going unhealthy in one sweep that raises MCPRegistryMassHeartbeatLoss", func(c *Config) any { return &c.MassLossShare }},
	{KeyMassLossMin, "fewest servers going unhealthy in one sweep that raise MCPRegistryMassHeartbeatLoss", func(c *Config) any { return &c.MassLossMin }},
	{KeyTLSCertFile, "PEM certificate chain: with --tls-key-file the API speaks HTTPS only (TLS 1.2+); reloaded when it changes and on SIGHUP", func(c *Config) any { return &c.TLSCertFile }},
	{KeyTLSKeyFile, "PEM private key of --tls-cert-file", func(c *Config) any { return &c.TLSKeyFile }},
	{KeyTLSClientCAFile, "PEM CA certificates: every connection must present a client certificate they sign (mTLS)", func(c *Config) any { return &c.TLSClientCAFile }},
	{KeyMaxConnections, "most open connections to the API; more wait in the kernel's backlog (must fit the open-file limit)", func(c *Config) any { return &c.MaxConnections }},
	{KeyTenantMaxServers, "most servers that are not deregistered a tenant may have; a new module past it is 403 (0: no quota)", func(c *Config) any { return &c.TenantMaxServers }},
	{KeyTenantRateLimit, "API requests per second of one tenant, per mcpd process; past it 429 (0: no limit)", func(c *Config) any { return &c.TenantRateLimit }},
	{KeyTenantRateBurst, "requests a tenant may make at once above --tenant-rate-limit", func(c *Config) any { return &c.TenantRateBurst }},
	{KeyTenantMaxWatches, "concurrent watch streams of one tenant, per mcpd process; past it 429 (0: no limit)", func(c *Config) any { return &c.TenantMaxWatches }},
	{KeyMCPMaxSessions, "open 2025-11-25 /mcp sessions of one tenant, per mcpd process; past it initialize is 429", func(c *Config) any { return &c.MCPMaxSessions }},
	{KeyMCPMaxSessionsPerSub, "open 2025-11-25 /mcp sessions of one token subject (sub) of a tenant, per mcpd process; past it initialize is 429 (0: only --mcp-max-sessions)", func(c *Config) any { return &c.MCPMaxSessionsPerSubject }},
	{KeyRegistryNamespace, "namespace of the server names of the MCP registry API (/v0.1): NAMESPACE/MODULE", func(c *Config) any { return &c.RegistryNamespace }},
	{KeyRegistryPublicTenant, "tenant UUID whose servers the MCP registry API (/v0.1) lists to GETs without a token (IDEs, CLIs, ToolHive); empty: such GETs are 401", func(c *Config) any { return &c.RegistryPublicTenant }},
	{KeyUI, "serve the read-only web board at /ui/ (--ui=false turns it off)", func(c *Config) any { return &c.UI }},
	{KeyCitusWorkerReads, "on Citus, read tenants' positions and change feed on each tenant's worker (its address from pg_dist_node; this URL's user, password and TLS) when mcpd can reach it, else through the coordinator (--citus-worker-reads=false: always through the coordinator)", func(c *Config) any { return &c.CitusWorkerReads }},
}

// Lookup returns the setting named name.
func Lookup(name string) (Setting, bool) {
	for _, s := range Settings {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}
