// Package alert delivers mcpd's alerts: a server that turns unhealthy fires
// MCPServerUnhealthy, and its recovery or deregistration resolves it. The
// Dispatcher reads the store's alert outbox (the audit trail, with a durable
// cursor per destination) and sends each event at least once to every
// destination, across restarts and with several replicas: to Prometheus
// Alertmanager's v2 API, where firing alerts are also re-sent periodically,
// and to JSON webhooks, signed with HMAC-SHA256 when a secret is set.
//
// A tenant's skill name none of whose skills is available any more fires
// MCPSkillUnavailable, resolved when one is again: decided from the
// skills_affected of the same events, with a durable firing set per
// destination (SkillAlerts) so that each outage is raised once.
//
// Each destination has its own cursor, goroutine and backoff, so one that
// is down delays nothing else. Delivery never blocks the monitor or the API.
package alert
