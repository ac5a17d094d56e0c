package migrations_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/migrations"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestEveryFunctionHasItsFile: each SQL function of the migrated schema is
// defined by exactly one file of functions/, named after it, so that a
// function changes in one place.
func TestEveryFunctionHasItsFile(t *testing.T) {
	t.Parallel()
	tx := pgtest.AdminTx(t)
	rows, err := tx.Query(ctx, `SELECT p.proname FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		if defined[name] {
			t.Errorf("function %s is overloaded: one name, one file", name)
		}
		defined[name] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range migrations.Functions() {
		name := strings.TrimSuffix(f.Name, ".sql")
		files = append(files, name)
		if _, ok := defined[name]; !ok {
			t.Errorf("functions/%s defines no function of the schema", f.Name)
		}
		if !strings.Contains(f.SQL, "FUNCTION "+name+"(") {
			t.Errorf("functions/%s does not create or replace %s", f.Name, name)
		}
	}
	for name := range defined {
		if !slices.Contains(files, name) {
			t.Errorf("function %s has no file in functions/", name)
		}
	}
}
