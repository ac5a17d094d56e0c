// Package heartbeat is the domain core of mcpd: the lifecycle of a registered
// MCP server (register, heartbeat, deregister), the health monitor that moves
// silent servers to degraded and unhealthy, the skill cascade, and the audit
// events every transition writes. Storage is behind the Store interface, with
// a PostgreSQL and an in-memory implementation that pass one conformance
// suite.
package heartbeat
