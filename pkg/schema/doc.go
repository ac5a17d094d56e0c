// Package schema applies mcpd's embedded PostgreSQL migrations (package
// migrations) with golang-migrate and reports the version a database is at,
// for mcpctl migrate. It speaks lib/pq, through golang-migrate's postgres
// driver, so that mcpctl links no pgx; mcpd's own check that the schema is
// the version it expects is pgstore.CheckSchema.
//
// Migrating is always explicit (mcpctl migrate up|down|status); nothing in
// mcpd migrates on start.
package schema
