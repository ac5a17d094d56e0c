// Package migrations holds the numbered PostgreSQL schema migrations of mcpd,
// embedded so that the binaries need no file on disk to migrate a database.
// schema.sql beside them is the schema after the last one (make schema
// writes it; the package's tests fail when it is stale); it is not embedded.
package migrations

import "embed"

// FS holds every NNNN_name.up.sql and NNNN_name.down.sql pair.
//
//go:embed *.up.sql *.down.sql
var FS embed.FS

// Latest is the schema version this build expects; /readyz reports not ready
// while the database is at any other version.
const Latest uint = 21
