// Package migrations holds the PostgreSQL schema of mcpd, embedded so that
// the binaries need no file on disk to migrate a database:
//
//   - the numbered migrations, NNNN_name.up.sql and NNNN_name.down.sql,
//     which change tables, indexes, policies and grants, one step at a time;
//   - the functions, functions/NAME.sql, one file per SQL function with its
//     grants, written as CREATE OR REPLACE. migrate up applies them after the
//     last numbered migration, in name order and under the migrator's lock,
//     whenever the database holds another set (mcp_schema_functions records
//     the digest of the set applied). So a migration that changes what a
//     function does edits that function's file alone, and restates no other.
//
// Numbered migrations up to 0021 still define the functions as they were at
// each step; from 0022 on, a function is changed in its file only. A new
// function comes with a numbered migration whose down drops it (migrate
// down to zero leaves nothing: TestMigrationRoundTrip); a function whose
// arguments or result change is dropped by the numbered migration that
// needs it gone, and created again by its file.
//
// schema.sql beside them is the schema after the last migration and the
// functions (make schema writes it; the package's tests fail when it is
// stale); it is not embedded.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
	"sync"
)

// FS holds every NNNN_name.up.sql and NNNN_name.down.sql pair.
//
//go:embed *.up.sql *.down.sql
var FS embed.FS

// Latest is the schema version this build expects; /readyz reports not ready
// while the database is at any other version.
const Latest uint = 33

//go:embed functions/*.sql
var functionsFS embed.FS

// Function is one file of functions/: a SQL function and its grants.
type Function struct {
	// Name is the file's name, "mcp_now.sql".
	Name string
	// SQL is the file's text, statements that can run again unchanged.
	SQL string
}

var functions = sync.OnceValues(func() ([]Function, string) {
	entries, err := fs.ReadDir(functionsFS, "functions")
	if err != nil {
		panic("migrations: " + err.Error()) // embedded at build time
	}
	out := make([]Function, 0, len(entries))
	h := sha256.New()
	for _, e := range entries {
		b, err := fs.ReadFile(functionsFS, "functions/"+e.Name())
		if err != nil {
			panic("migrations: " + err.Error())
		}
		out = append(out, Function{Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for _, f := range out {
		h.Write([]byte(f.Name))
		h.Write([]byte{0})
		h.Write([]byte(f.SQL))
		h.Write([]byte{0})
	}
	return out, hex.EncodeToString(h.Sum(nil))
})

// Functions returns the files of functions/ in the order migrate up
// applies them (by name).
func Functions() []Function {
	fns, _ := functions()
	return fns
}

// FunctionsDigest identifies this build's set of functions: the SHA-256 of
// the files' names and texts, in hex. mcp_schema_functions holds the digest
// of the set a database has.
func FunctionsDigest() string {
	_, digest := functions()
	return digest
}
