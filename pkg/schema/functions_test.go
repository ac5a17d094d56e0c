package schema_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cyberos/mcpd/migrations"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/schema"
)

// TestUpAppliesFunctions: migrate up puts this build's functions in place
// whenever the database holds another set, and records the set; a database
// that holds it already is left alone.
func TestUpAppliesFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := emptyDB(t)
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up: %v", err)
	}
	digest := func() string {
		t.Helper()
		var d string
		if err := db.Admin.QueryRow(ctx, `SELECT digest FROM mcp_schema_functions`).Scan(&d); err != nil {
			t.Fatalf("read digest: %v", err)
		}
		return d
	}
	if got := digest(); got != migrations.FunctionsDigest() {
		t.Fatalf("after Up the digest is %q, want this build's %q", got, migrations.FunctionsDigest())
	}
	nowIs := func() time.Time {
		t.Helper()
		var at time.Time
		if err := db.Admin.QueryRow(ctx, `SELECT mcp_now(NULL)`).Scan(&at); err != nil {
			t.Fatalf("mcp_now: %v", err)
		}
		return at
	}
	// What another build's migrate up would leave: its own body of one
	// function, and its digest.
	const otherBody = `CREATE OR REPLACE FUNCTION mcp_now(p_now timestamptz) RETURNS timestamptz
		LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN '2000-01-01T00:00:00Z'; END $$`
	if _, err := db.Admin.Exec(ctx, otherBody); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `UPDATE mcp_schema_functions SET digest = 'another build'`); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.CheckSchema(ctx, db.Admin); !errors.Is(err, pgstore.ErrSchemaMismatch) {
		t.Fatalf("with another build's functions: CheckSchema = %v, want ErrSchemaMismatch", err)
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up over another build's functions: %v", err)
	}
	if at := nowIs(); at.Year() == 2000 {
		t.Fatalf("after Up mcp_now is still the other build's: %v", at)
	}
	if got := digest(); got != migrations.FunctionsDigest() {
		t.Fatalf("after Up the digest is %q, want %q", got, migrations.FunctionsDigest())
	}
	if err := pgstore.CheckSchema(ctx, db.Admin); err != nil {
		t.Fatalf("after Up: CheckSchema = %v", err)
	}
	// The digest says the set is there: Up does not apply it again.
	if _, err := db.Admin.Exec(ctx, otherBody); err != nil {
		t.Fatal(err)
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up with the set recorded: %v", err)
	}
	if at := nowIs(); at.Year() != 2000 {
		t.Fatalf("Up applied the functions again though the database records them: mcp_now = %v", at)
	}
}
