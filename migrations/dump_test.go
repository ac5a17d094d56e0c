package migrations_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/migrations"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

var writeSchema = flag.Bool("write-schema", false, "write schema.sql from the migrated database (make schema)")

// schemaFile is the schema as it stands after every migration, committed
// so that a reader (or a reviewer of a new migration) sees one source.
const schemaFile = "schema.sql"

// TestSchemaSQLUpToDate dumps the migrated template's schema and compares it
// with the committed schema.sql; make schema writes it again.
func TestSchemaSQLUpToDate(t *testing.T) {
	db := pgtest.NewDB(t)
	pgDump := filepath.Join(pgtest.Shared(t).BinDir(), "pg_dump")
	if fi, err := os.Stat(pgDump); err != nil || fi.IsDir() {
		if pgDump, err = exec.LookPath("pg_dump"); err != nil {
			pgtest.Missing(t, "pg_dump not found (it ships with PostgreSQL's client package: apt-get install postgresql-client): "+err.Error())
		}
	}
	cmd := exec.Command(pgDump, "--schema-only", "--no-owner", "--no-tablespaces", "--dbname", db.AdminURL)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, stderr.String())
	}
	version, err := exec.Command(pgDump, "--version").Output()
	if err != nil {
		t.Fatalf("pg_dump --version: %v", err)
	}
	major := majorVersion(string(version))
	got := normaliseDump(string(out), major)
	if *writeSchema {
		if err := os.WriteFile(schemaFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v: run make schema", err)
	}
	if string(committed) == got {
		return
	}
	if first, _, _ := strings.Cut(string(committed), "\n"); !strings.HasSuffix(first, "pg_dump "+major) {
		t.Skipf("migrations/schema.sql was dumped by another PostgreSQL major version (%q), this is %s", first, major)
	}
	t.Errorf("migrations/schema.sql is stale: run make schema (first difference at line %d)",
		firstDiffLine(string(committed), got))
}

var majorRe = regexp.MustCompile(`\) (\d+)`)

// majorVersion is the major version in pg_dump --version's answer.
func majorVersion(s string) string {
	if m := majorRe.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return "unknown"
}

// normaliseDump keeps what the schema is: no version comments, no
// \restrict lines (their key is random), no runs of blank lines; a header
// says which migration and which pg_dump major version made it.
func normaliseDump(dump, major string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- mcpd's schema after migration %d (make schema), dumped by pg_dump %s\n", migrations.Latest, major)
	blank := true
	for line := range strings.SplitSeq(dump, "\n") {
		switch {
		case strings.HasPrefix(line, "-- Dumped from database version"),
			strings.HasPrefix(line, "-- Dumped by pg_dump version"),
			strings.HasPrefix(line, `\restrict`), strings.HasPrefix(line, `\unrestrict`):
			continue
		case strings.TrimSpace(line) == "":
			if blank {
				continue
			}
			blank = true
		default:
			blank = false
		}
		b.WriteString(strings.TrimRight(line, " \t"))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func firstDiffLine(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}
