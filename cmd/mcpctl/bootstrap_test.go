package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestBootstrapWithCreateRoleOwner runs the README's production bootstrap
// on a fresh PostgreSQL cluster, statement for statement: a superuser
// creates the owner (LOGIN CREATEROLE, nothing more) and its database; the
// owner runs mcpctl migrate up, creates mcpd's login role and grants it
// cyberos_app; mcpd's role then reads under row-level security. CREATEROLE
// is enough: no step needs a superuser after the first two statements.
func TestBootstrapWithCreateRoleOwner(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCluster(t)
	ctx := context.Background()
	exec := func(url string, stmts ...string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	// As a superuser, once (README: "Production database").
	exec(c.URL("", "postgres"),
		`CREATE ROLE mcpd_owner LOGIN CREATEROLE`,
		`CREATE DATABASE mcpd OWNER mcpd_owner`)
	owner := c.URL("mcpd_owner", "mcpd")
	if code, out, errOut := runMain(t, nil, "migrate", "up", "--database-url", owner); code != 0 {
		t.Fatalf("migrate up as the CREATEROLE owner: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runMain(t, nil, "migrate", "status", "--database-url", owner, "-o", "json")
	if code != 0 || !strings.Contains(out, `"pending": 0`) || !strings.Contains(out, `"dirty": false`) {
		t.Fatalf("migrate status: exit %d\n%s%s", code, out, errOut)
	}
	// As the owner: mcpd's login role and its one grant.
	exec(owner, `CREATE ROLE mcpd LOGIN`, `GRANT cyberos_app TO mcpd`)

	conn, err := pgx.Connect(ctx, c.URL("mcpd", "mcpd"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super, createRole, bypass bool
	if err := conn.QueryRow(ctx, `SELECT rolsuper, rolcreaterole, rolbypassrls FROM pg_roles WHERE rolname = 'mcpd_owner'`).
		Scan(&super, &createRole, &bypass); err != nil || super || !createRole || bypass {
		t.Fatalf("the owner: superuser %t, createrole %t, bypassrls %t (%v)", super, createRole, bypass, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var n int
	if err := tx.QueryRow(ctx, `SELECT set_config('auth.tenant_id', $1, true)`, uuid.NewString()).Scan(new(string)); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM mcp_servers`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("mcpd's role reads mcp_servers: %d, %v", n, err)
	}
	var counts int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM mcp_status_counts()`).Scan(&counts); err != nil {
		t.Fatalf("mcpd's role calls the monitor's functions: %v", err)
	}
}
