// Package schema applies mcpd's embedded PostgreSQL migrations (package
// migrations) with golang-migrate, reports the version a database is at, and
// checks, for /readyz, that it is exactly the version this build expects.
//
// Migrating is always explicit (mcpctl migrate up|down|status); nothing in
// mcpd migrates on start.
package schema
