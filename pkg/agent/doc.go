// Package agent is the sidecar that keeps an MCP server registered in mcpd
// for as long as the server answers: it learns what the server says of
// itself (pkg/mcpinspect) and registers it, then before every heartbeat
// probes it (ping, or server/discover on revision 2026-07-28) and sends the
// heartbeat only when the probe succeeds. A server that stops answering
// thus goes degraded and then unhealthy in the registry by the registry's
// own rules, and comes back healthy with the first heartbeat after it
// answers again.
//
// The agent re-registers when the server's tool list changes
// (notifications/tools/list_changed) and when a new connection or process
// shows a different server; it reconnects over HTTP, restarts a stdio
// server that exited (with backoff), registers again when mcpd answers a
// heartbeat with 404 (it forgot the server) or 409 (someone deregistered
// it), and keeps retrying, with capped exponential backoff and jitter, while
// mcpd is unreachable or failing. When its context ends it deregisters the
// server and stops the stdio process.
package agent
