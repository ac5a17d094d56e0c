// Package registry is mcpd's domain: a registered MCP server, its skills and
// remotes, the four statuses and the rules that move a server between them
// (misses of the heartbeat interval), the audit event kinds as one table,
// the input rules of a registration, positions in the audit trail, and the
// small store roles (Lifecycle, ServerReader, AuditReader, FeedReader,
// Sweeper) that the PostgreSQL and in-memory stores satisfy. It holds no
// service: the Registrar and the Monitor that drive a server's lifecycle
// are in pkg/lifecycle. Programs that talk to mcpd may import it for the
// types the API carries.
package registry
