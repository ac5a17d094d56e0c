package main

import (
	"context"
	"slices"
	"testing"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestEverySecurityDefinerIsFenced checks every SECURITY DEFINER function
// of the migrated schema, those of migrations to come included: each runs
// with a fixed search_path (so that an object the caller creates cannot
// stand in for one the function uses), PUBLIC may not execute it, and only
// cyberos_app may. A trigger function (0015's) cannot be called at all,
// only fired by its trigger, so nobody but its owner may execute it.
// migrations/schema_test.go checks the two of 0004 by name; this one finds
// them all (docs/security.md).
func TestEverySecurityDefinerIsFenced(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	rows, err := db.Admin.Query(ctx, `
SELECT p.oid::regprocedure::text, coalesce(p.proconfig, '{}'),
       has_function_privilege('public', p.oid, 'EXECUTE'),
       has_function_privilege('cyberos_app', p.oid, 'EXECUTE'),
       p.prorettype = 'trigger'::regtype
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.prosecdef AND n.nspname = 'public'
ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var (
			name        string
			config      []string
			public, app bool
			trigger     bool
		)
		if err := rows.Scan(&name, &config, &public, &app, &trigger); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		if !slices.Contains(config, "search_path=public, pg_temp") {
			t.Errorf("%s: security definer without a fixed search_path (config %v)", name, config)
		}
		if trigger {
			if public || app {
				t.Errorf("%s: trigger function executable by PUBLIC %v, by cyberos_app %v; want neither", name, public, app)
			}
		} else if public || !app {
			t.Errorf("%s: executable by PUBLIC %v, by cyberos_app %v; want false, true", name, public, app)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) < 2 {
		t.Fatalf("found only %v: the query misses the schema's functions", names)
	}
	t.Logf("FIGURE security definers: %d, each with search_path=public, pg_temp, none executable by PUBLIC: %v", len(names), names)
}
