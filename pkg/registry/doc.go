// Package registry is mcpd's domain, what its API carries: a registered
// MCP server, its skills and remotes, the four statuses and the rules that
// move a server between them (misses of the heartbeat interval), the audit
// event kinds as one table, the input rules of a registration, positions
// in the audit trail, errors, filters, pages and availability. It holds no
// service and no store: the roles a store implements are in pkg/store, the
// Registrar and the Monitor that drive a server's lifecycle in
// pkg/lifecycle. Programs that talk to mcpd may import it for the types the
// API carries.
package registry
