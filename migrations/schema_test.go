package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/migrations"
	"github.com/cyberos/mcpd/pkg/schema"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var ctx = context.Background()

// asTenant runs fn in a transaction of pool with auth.tenant_id set to
// tenant (nothing set for uuid.Nil), and commits when fn returns nil.
func asTenant(t *testing.T, pool *pgxpool.Pool, tenant uuid.UUID, fn func(tx pgx.Tx) error) error {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if tenant != uuid.Nil {
		if _, err := tx.Exec(ctx, `SELECT set_config('auth.tenant_id', $1, true)`, tenant.String()); err != nil {
			t.Fatal(err)
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func wantState(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := sqlState(err); got != code {
		t.Fatalf("%s: error %v (SQLSTATE %q), want SQLSTATE %s", what, err, got, code)
	}
}

const (
	insufficientPrivilege = pgerrcode.InsufficientPrivilege // also: a row that violates an RLS policy
	uniqueViolation       = pgerrcode.UniqueViolation
	checkViolation        = pgerrcode.CheckViolation
)

func insertServer(tx pgx.Tx, tenant uuid.UUID, module string) (uuid.UUID, error) {
	id := uuid.New()
	_, err := tx.Exec(ctx, `INSERT INTO mcp_servers
		(server_id, tenant_id, module_name, version, supported_protocols, capability_advertisement, trace_id)
		VALUES ($1, $2, $3, '1.0.0', ARRAY['2025-06-18'], '{"tools": {}}', $4)`,
		id, tenant, module, strings.Repeat("ab", 16))
	return id, err
}

// seed registers module for tenant through the app role, with one skill.
func seed(t *testing.T, db *pgtest.DB, tenant uuid.UUID, module string) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	err := asTenant(t, db.App, tenant, func(tx pgx.Tx) error {
		var err error
		if id, err = insertServer(tx, tenant, module); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO mcp_skills (skill_id, tenant_id, server_id, name) VALUES ($1, $2, $3, $4)`,
			uuid.New(), tenant, id, module+"-skill")
		return err
	})
	if err != nil {
		t.Fatalf("seed %s: %v", module, err)
	}
	return id
}

func count(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := q.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestRLSKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	// One rolled-back transaction of the app role; each step sets the
	// tenant it acts as.
	tx := pgtest.AppTx(t)
	a, b := uuid.New(), uuid.New()
	srv := seedTx(t, tx, a, "calendar")

	// Read: b sees none of a's servers, skills or events.
	if _, err := tx.Exec(ctx, `INSERT INTO mcp_audit_events
		(event_id, tenant_id, kind, server_id, module_name, to_status, occurred_at, body, position)
		VALUES ($1, $2, 'mcp.server.registered', $3, 'calendar', 'healthy', now(), '{}', mcp_feed_next($2, 'mcp.server.registered', NULL))`, uuid.New(), a, srv); err != nil {
		t.Fatal(err)
	}
	setTenant(t, tx, b)
	for _, table := range []string{"mcp_servers", "mcp_skills", "mcp_audit_events"} {
		if n := count(t, tx, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("tenant b sees %d rows of %s, want 0", n, table)
		}
	}
	setTenant(t, tx, a)
	for _, table := range []string{"mcp_servers", "mcp_skills", "mcp_audit_events"} {
		if n := count(t, tx, `SELECT count(*) FROM `+table); n != 1 {
			t.Errorf("tenant a sees %d rows of %s, want 1", n, table)
		}
	}

	// Update: b's UPDATE of a's rows changes nothing.
	setTenant(t, tx, b)
	tag, err := tx.Exec(ctx, `UPDATE mcp_servers SET version = '6.6.6', status = 'deregistered' WHERE server_id = $1`, srv)
	if err != nil {
		t.Fatalf("update of another tenant's server: %v", err)
	}
	if tag.RowsAffected() != 0 {
		t.Errorf("tenant b updated %d of a's servers", tag.RowsAffected())
	}
	tag, err = tx.Exec(ctx, `UPDATE mcp_skills SET available = false, unavailable_reason = 'x' WHERE server_id = $1`, srv)
	if err != nil {
		t.Fatalf("update of another tenant's skills: %v", err)
	}
	if tag.RowsAffected() != 0 {
		t.Errorf("tenant b updated %d of a's skills", tag.RowsAffected())
	}
	tag, err = tx.Exec(ctx, `DELETE FROM mcp_skills WHERE server_id = $1`, srv)
	if err != nil {
		t.Fatalf("delete of another tenant's skills: %v", err)
	}
	if tag.RowsAffected() != 0 {
		t.Errorf("tenant b deleted %d of a's skills", tag.RowsAffected())
	}
	// Read back as a, who sees its own row whole.
	setTenant(t, tx, a)
	var version string
	if err := tx.QueryRow(ctx, `SELECT version FROM mcp_servers WHERE server_id = $1`, srv).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != "1.0.0" {
		t.Fatalf("a's server has version %q after b's update, want 1.0.0", version)
	}

	// Insert: b cannot write rows of a (WITH CHECK).
	setTenant(t, tx, b)
	err = savepoint(t, tx, func(sp pgx.Tx) error {
		_, err := insertServer(sp, a, "smuggled")
		return err
	})
	wantState(t, "tenant b inserts a server of tenant a", err, insufficientPrivilege)
	err = inSavepoint(t, tx, `INSERT INTO mcp_skills (skill_id, tenant_id, server_id, name) VALUES ($1, $2, $3, 'x')`,
		uuid.New(), a, srv)
	wantState(t, "tenant b inserts a skill of tenant a", err, insufficientPrivilege)
	err = inSavepoint(t, tx, `INSERT INTO mcp_audit_events
		(event_id, tenant_id, kind, server_id, module_name, to_status, occurred_at, body, position)
		VALUES ($1, $2, 'mcp.server.deregistered', $3, 'calendar', 'deregistered', now(), '{}', mcp_feed_next($2, 'mcp.server.deregistered', NULL))`, uuid.New(), a, srv)
	wantState(t, "tenant b inserts an audit event of tenant a", err, insufficientPrivilege)
}

func TestNoTenantSeesNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	seed(t, db, uuid.New(), "calendar")
	for _, tt := range []struct {
		name  string
		setup string
	}{
		{"unset", ``},
		{"empty", `SELECT set_config('auth.tenant_id', '', true)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_ = asTenant(t, db.App, uuid.Nil, func(tx pgx.Tx) error {
				if tt.setup != "" {
					if _, err := tx.Exec(ctx, tt.setup); err != nil {
						t.Fatal(err)
					}
				}
				for _, table := range []string{"mcp_servers", "mcp_skills", "mcp_audit_events"} {
					if n := count(t, tx, `SELECT count(*) FROM `+table); n != 0 {
						t.Errorf("without a tenant the app sees %d rows of %s, want 0", n, table)
					}
				}
				tag, err := tx.Exec(ctx, `UPDATE mcp_servers SET version = '9.9.9'`)
				if err != nil {
					t.Fatalf("update without a tenant: %v", err)
				}
				if tag.RowsAffected() != 0 {
					t.Errorf("update without a tenant changed %d rows", tag.RowsAffected())
				}
				return nil
			})
		})
	}
	// Also outside any transaction, on a fresh session.
	if n := count(t, db.App, `SELECT count(*) FROM mcp_servers`); n != 0 {
		t.Fatalf("a session without a tenant sees %d servers", n)
	}
	err := asTenant(t, db.App, uuid.Nil, func(tx pgx.Tx) error {
		_, err := insertServer(tx, uuid.New(), "no-tenant")
		return err
	})
	wantState(t, "insert without a tenant", err, insufficientPrivilege)
}

func TestUniqueTenantModule(t *testing.T) {
	t.Parallel()
	tx := pgtest.AppTx(t)
	a, b := uuid.New(), uuid.New()
	seedTx(t, tx, a, "calendar")
	err := savepoint(t, tx, func(sp pgx.Tx) error {
		_, err := insertServer(sp, a, "calendar")
		return err
	})
	wantState(t, "a second calendar for one tenant", err, uniqueViolation)
	seedTx(t, tx, b, "calendar") // another tenant's calendar is fine
}

func TestStatusCheck(t *testing.T) {
	t.Parallel()
	tx := pgtest.AppTx(t)
	a := uuid.New()
	srv := seedTx(t, tx, a, "calendar")
	for _, status := range []string{"healthy", "degraded", "unhealthy", "deregistered"} {
		if _, err := tx.Exec(ctx, `UPDATE mcp_servers SET status = $2 WHERE server_id = $1`, srv, status); err != nil {
			t.Fatalf("status %s: %v", status, err)
		}
	}
	err := inSavepoint(t, tx, `UPDATE mcp_servers SET status = 'zombie' WHERE server_id = $1`, srv)
	wantState(t, "a fifth status", err, checkViolation)
	err = inSavepoint(t, tx, `INSERT INTO mcp_servers (server_id, tenant_id, module_name, version, supported_protocols, status)
			VALUES ($1, $2, 'other', '1.0.0', ARRAY['2025-06-18'], 'Healthy')`, uuid.New(), a)
	wantState(t, "insert with a fifth status", err, checkViolation)
}

func TestServerColumnsTheAppMayNotChange(t *testing.T) {
	t.Parallel()
	tx := pgtest.AppTx(t)
	a := uuid.New()
	srv := seedTx(t, tx, a, "calendar")
	for _, set := range []string{
		`module_name = 'renamed'`,
		fmt.Sprintf(`tenant_id = '%s'`, uuid.New()),
		fmt.Sprintf(`server_id = '%s'`, uuid.New()),
		`registered_at = now() - interval '1 day'`,
		fmt.Sprintf(`trace_id = '%s'`, strings.Repeat("cd", 16)),
	} {
		t.Run(strings.Fields(set)[0], func(t *testing.T) {
			err := inSavepoint(t, tx, `UPDATE mcp_servers SET `+set+` WHERE server_id = $1`, srv)
			wantState(t, "UPDATE SET "+set, err, insufficientPrivilege)
		})
	}
	t.Run("delete", func(t *testing.T) {
		err := inSavepoint(t, tx, `DELETE FROM mcp_servers WHERE server_id = $1`, srv)
		wantState(t, "DELETE of an own server", err, insufficientPrivilege)
		err = inSavepoint(t, tx, `DELETE FROM mcp_servers`)
		wantState(t, "DELETE of every server", err, insufficientPrivilege)
		err = inSavepoint(t, tx, `TRUNCATE mcp_servers CASCADE`)
		wantState(t, "TRUNCATE", err, insufficientPrivilege)
	})
	t.Run("skill name", func(t *testing.T) {
		err := inSavepoint(t, tx, `UPDATE mcp_skills SET name = 'renamed' WHERE server_id = $1`, srv)
		wantState(t, "UPDATE mcp_skills SET name", err, insufficientPrivilege)
	})
	// What the lifecycle needs stays possible.
	if err := savepoint(t, tx, func(sp pgx.Tx) error {
		_, err := sp.Exec(ctx, `UPDATE mcp_servers SET version = '1.1.0', supported_protocols = ARRAY['2025-11-25'],
			capability_advertisement = '{}', status = 'deregistered', last_heartbeat_at = now(),
			deregistered_at = now() WHERE server_id = $1`, srv)
		if err != nil {
			return err
		}
		_, err = sp.Exec(ctx, `UPDATE mcp_skills SET description = 'd', available = false,
			unavailable_reason = 'server_deregistered' WHERE server_id = $1`, srv)
		return err
	}); err != nil {
		t.Fatalf("the updates the lifecycle makes: %v", err)
	}
}

// tenantTx returns a transaction of the app role with auth.tenant_id set
// to tenant, rolled back when the test ends (pgtest.AppTx): for a case that
// needs no commit.
func tenantTx(t *testing.T, tenant uuid.UUID) pgx.Tx {
	t.Helper()
	tx := pgtest.AppTx(t)
	setTenant(t, tx, tenant)
	return tx
}

// setTenant sets auth.tenant_id to tenant for the rest of tx, or to the
// empty string (no tenant, as unset: the policies read it through NULLIF)
// for uuid.Nil.
func setTenant(t *testing.T, tx pgx.Tx, tenant uuid.UUID) {
	t.Helper()
	v := ""
	if tenant != uuid.Nil {
		v = tenant.String()
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('auth.tenant_id', $1, true)`, v); err != nil {
		t.Fatal(err)
	}
}

// seedTx is seed in tx: it registers module for tenant with one skill,
// and leaves tenant set in tx.
func seedTx(t *testing.T, tx pgx.Tx, tenant uuid.UUID, module string) uuid.UUID {
	t.Helper()
	setTenant(t, tx, tenant)
	id, err := insertServer(tx, tenant, module)
	if err == nil {
		_, err = tx.Exec(ctx, `INSERT INTO mcp_skills (skill_id, tenant_id, server_id, name) VALUES ($1, $2, $3, $4)`,
			uuid.New(), tenant, id, module+"-skill")
	}
	if err != nil {
		t.Fatalf("seed %s: %v", module, err)
	}
	return id
}

// savepoint runs fn in a savepoint of tx, rolled back when fn fails, so
// that tx goes on after an error the case expects; it returns fn's error.
func savepoint(t *testing.T, tx pgx.Tx, fn func(sp pgx.Tx) error) error {
	t.Helper()
	sp, err := tx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(sp); err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			t.Fatal(rerr)
		}
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return nil
}

// inSavepoint runs stmt in a savepoint of tx (see savepoint).
func inSavepoint(t *testing.T, tx pgx.Tx, stmt string, args ...any) error {
	t.Helper()
	return savepoint(t, tx, func(sp pgx.Tx) error {
		_, err := sp.Exec(ctx, stmt, args...)
		return err
	})
}

func TestAuditIsAppendOnly(t *testing.T) {
	t.Parallel()
	a := uuid.New()
	tx := tenantTx(t, a)
	srv, err := insertServer(tx, a, "calendar")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO mcp_audit_events
		(event_id, tenant_id, kind, server_id, module_name, to_status, occurred_at, body, position)
		VALUES ($1, $2, 'mcp.server.registered', $3, 'calendar', 'healthy', now(), '{}', mcp_feed_next($2, 'mcp.server.registered', NULL))`, uuid.New(), a, srv); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE mcp_audit_events SET kind = 'mcp.server.recovered'`,
		`UPDATE mcp_audit_events SET body = '{}'`,
		`DELETE FROM mcp_audit_events`,
		`TRUNCATE mcp_audit_events`,
	} {
		wantState(t, stmt, inSavepoint(t, tx, stmt), insufficientPrivilege)
	}
	err = inSavepoint(t, tx, `INSERT INTO mcp_audit_events
		(event_id, tenant_id, kind, server_id, module_name, to_status, occurred_at, body, position)
		VALUES ($1, $2, 'mcp.server.exploded', $3, 'calendar', 'healthy', now(), '{}', mcp_feed_next($2, 'mcp.server.exploded', NULL))`, uuid.New(), a, srv)
	wantState(t, "a sixth event kind", err, checkViolation)
	if n := count(t, tx, `SELECT count(*) FROM mcp_audit_events WHERE tenant_id = $1`, a); n != 1 {
		t.Fatalf("%d audit events, want 1", n)
	}
}

func TestAppRoleIsUnprivileged(t *testing.T) {
	t.Parallel()
	// The app role's own session, in a transaction rolled back: what it
	// cannot do fails in a savepoint, and nothing it did is kept.
	tx := pgtest.AppTx(t)
	for _, role := range []string{"current_user", "'cyberos_app'"} {
		var super, bypass, createrole, createdb bool
		if err := tx.QueryRow(ctx, `SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb
			FROM pg_roles WHERE rolname = `+role).Scan(&super, &bypass, &createrole, &createdb); err != nil {
			t.Fatal(err)
		}
		if super || bypass || createrole || createdb {
			t.Fatalf("%s: superuser=%v bypassrls=%v createrole=%v createdb=%v, want all false",
				role, super, bypass, createrole, createdb)
		}
		// Owns nothing, in any database of the cluster.
		if n := count(t, tx, `SELECT count(*) FROM pg_shdepend WHERE deptype = 'o'
			AND refclassid = 'pg_authid'::regclass AND refobjid = (SELECT oid FROM pg_roles WHERE rolname = `+role+`)`); n != 0 {
			t.Fatalf("%s owns %d objects, want 0", role, n)
		}
	}
	var canLogin bool
	if err := tx.QueryRow(ctx, `SELECT rolcanlogin FROM pg_roles WHERE rolname = 'cyberos_app'`).Scan(&canLogin); err != nil {
		t.Fatal(err)
	}
	if canLogin {
		t.Fatal("cyberos_app can log in; it must be a group role")
	}
	// And it cannot come to own anything.
	for _, stmt := range []string{
		`CREATE TABLE public.mine (id int)`,
		`CREATE FUNCTION public.mine() RETURNS int LANGUAGE sql AS 'SELECT 1'`,
		`CREATE SCHEMA mine`,
	} {
		wantState(t, stmt, inSavepoint(t, tx, stmt), insufficientPrivilege)
	}
	for _, stmt := range []string{
		`ALTER TABLE mcp_servers DISABLE ROW LEVEL SECURITY`,
		`DROP POLICY servers_rls ON mcp_servers`,
		`ALTER FUNCTION mcp_status_counts() SECURITY INVOKER`,
		`SET ROLE postgres`,
	} {
		err := inSavepoint(t, tx, stmt)
		if sqlState(err) != insufficientPrivilege && sqlState(err) != pgerrcode.UndefinedObject { // or: no such role
			t.Fatalf("%s: %v, want permission denied", stmt, err)
		}
	}
}

func TestSweepAndCountsAreTheOnlyWayAcross(t *testing.T) {
	t.Parallel()
	// One rolled-back transaction of the app role (the shared rollback
	// database holds no committed server, so the sweep and the counts see
	// only this case's rows); its now() is one instant throughout.
	tx := pgtest.AppTx(t)
	a, b := uuid.New(), uuid.New()
	sa := seedTx(t, tx, a, "calendar")
	sb := seedTx(t, tx, b, "mail")
	seedTx(t, tx, b, "fresh")
	// Each tenant backdates its heartbeat: a's by 25 s, b's by 35 s.
	for _, hb := range []struct {
		tenant, server uuid.UUID
		age            string
	}{{a, sa, "25 seconds"}, {b, sb, "35 seconds"}} {
		setTenant(t, tx, hb.tenant)
		if tag, err := tx.Exec(ctx, `UPDATE mcp_servers SET last_heartbeat_at = now() - $2::interval WHERE server_id = $1`,
			hb.server, hb.age); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("backdate %s: %v, %d rows", hb.server, err, tag.RowsAffected())
		}
	}

	// No tenant set: the app sees no row directly, but the sweep moves both
	// tenants' servers and returns only the events.
	setTenant(t, tx, uuid.Nil)
	rows, err := tx.Query(ctx, `SELECT * FROM mcp_sweep(now(), interval '20 seconds', interval '30 seconds', 100)`)
	if err != nil {
		t.Fatalf("app role executes mcp_sweep: %v", err)
	}
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	type event struct {
		EventID    uuid.UUID      `db:"event_id"`
		TenantID   uuid.UUID      `db:"tenant_id"`
		Kind       string         `db:"kind"`
		ServerID   uuid.UUID      `db:"server_id"`
		ModuleName string         `db:"module_name"`
		FromStatus *string        `db:"from_status"`
		ToStatus   string         `db:"to_status"`
		TraceID    *string        `db:"trace_id"`
		OccurredAt time.Time      `db:"occurred_at"`
		Body       map[string]any `db:"body"`
	}
	events, err := pgx.CollectRows(rows, pgx.RowToStructByName[event])
	if err != nil {
		t.Fatal(err)
	}
	wantCols := []string{"event_id", "tenant_id", "kind", "server_id", "module_name", "from_status",
		"to_status", "trace_id", "occurred_at", "body"}
	if !slices.Equal(cols, wantCols) {
		t.Fatalf("mcp_sweep returns %v, want %v", cols, wantCols)
	}
	if len(events) != 2 {
		t.Fatalf("sweep returned %d events, want 2: %+v", len(events), events)
	}
	byServer := map[uuid.UUID]event{}
	for _, e := range events {
		byServer[e.ServerID] = e
		var keys []string
		for k := range e.Body {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if want := []string{"module_name", "server_id", "skills_affected", "status", "supported_protocols", "version"}; !slices.Equal(keys, want) {
			t.Fatalf("event body keys %v, want %v (no capabilities, nothing else)", keys, want)
		}
	}
	if e := byServer[sa]; e.TenantID != a || e.Kind != "mcp.server.degraded" || e.ToStatus != "degraded" {
		t.Fatalf("a's event = %+v, want degraded of tenant a", e)
	}
	if e := byServer[sb]; e.TenantID != b || e.Kind != "mcp.server.unhealthy" ||
		fmt.Sprint(e.Body["skills_affected"]) != "[mail-skill]" {
		t.Fatalf("b's event = %+v, want unhealthy of tenant b with mail-skill affected", e)
	}

	// A second sweep at the same time finds nothing to do, and so shows
	// nothing: the function is no window onto the tables.
	if n := count(t, tx, `SELECT count(*) FROM mcp_sweep(now(), interval '20 seconds', interval '30 seconds', 100)`); n != 0 {
		t.Fatalf("second sweep returned %d events, want 0", n)
	}
	for _, table := range []string{"mcp_servers", "mcp_skills", "mcp_audit_events"} {
		if n := count(t, tx, `SELECT count(*) FROM `+table); n != 0 {
			t.Fatalf("after sweeping, the app without a tenant sees %d rows of %s", n, table)
		}
	}
	// What was written, counted tenant by tenant (the two tenants are all
	// there is).
	written, cascaded := 0, 0
	for _, tenant := range []uuid.UUID{a, b} {
		setTenant(t, tx, tenant)
		written += count(t, tx, `SELECT count(*) FROM mcp_audit_events`)
		cascaded += count(t, tx, `SELECT count(*) FROM mcp_skills WHERE NOT available AND unavailable_reason = 'server_unhealthy'`)
	}
	setTenant(t, tx, uuid.Nil)
	if written != 2 {
		t.Fatalf("%d audit events written, want 2", written)
	}
	if cascaded != 1 {
		t.Fatalf("%d skills cascaded, want 1", cascaded)
	}

	// Counts: across tenants, only status and a number. A temporary table
	// of the same name does not fool the function (fixed search_path).
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE mcp_servers AS SELECT 'healthy'::text AS status FROM generate_series(1, 50)`); err != nil {
		// The session keeps the temp table (until the rollback); that is
		// the point.
		t.Fatalf("temp table: %v", err)
	}
	rows, err = tx.Query(ctx, `SELECT * FROM mcp_status_counts()`)
	if err != nil {
		t.Fatalf("app role executes mcp_status_counts: %v", err)
	}
	cols = cols[:0]
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	counts := map[string]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		counts[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cols, []string{"status", "servers"}) {
		t.Fatalf("mcp_status_counts returns %v, want [status servers]", cols)
	}
	if want := map[string]int64{"healthy": 1, "degraded": 1, "unhealthy": 1}; fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("counts = %v, want %v", counts, want)
	}
}

func TestFunctionsAreNotPublic(t *testing.T) {
	t.Parallel()
	// Reads and a role made in a transaction rolled back: no commit.
	tx := pgtest.AdminTx(t)
	for _, fn := range []string{"mcp_sweep(timestamptz, interval, interval, integer)", "mcp_status_counts()",
		"mcp_heartbeat(uuid[], uuid[], timestamptz)", "mcp_heartbeat_healthy(uuid[], uuid[], timestamptz)"} {
		var public, app bool
		if err := tx.QueryRow(ctx, `SELECT has_function_privilege('public', $1, 'EXECUTE'),
			has_function_privilege('cyberos_app', $1, 'EXECUTE')`, fn).Scan(&public, &app); err != nil {
			t.Fatal(err)
		}
		if public || !app {
			t.Fatalf("%s: EXECUTE for PUBLIC %v, for cyberos_app %v; want false, true", fn, public, app)
		}
		var definer bool
		var config []string
		if err := tx.QueryRow(ctx, `SELECT prosecdef, coalesce(proconfig, '{}') FROM pg_proc WHERE oid = $1::regprocedure`,
			fn).Scan(&definer, &config); err != nil {
			t.Fatal(err)
		}
		if !definer || !slices.Contains(config, "search_path=public, pg_temp") {
			t.Fatalf("%s: security definer %v, config %v; want a definer with search_path=public, pg_temp", fn, definer, config)
		}
	}
	// A role outside cyberos_app is refused.
	outsider := "mcpd_outsider_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := tx.Exec(ctx, `CREATE ROLE `+outsider+` NOLOGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+outsider); err != nil {
		t.Fatal(err)
	}
	_, err := tx.Exec(ctx, `SELECT * FROM mcp_status_counts()`)
	wantState(t, "an outsider calls mcp_status_counts", err, insufficientPrivilege)
}

// fingerprint describes the schema: tables, columns, constraints, indexes,
// policies, grants and functions.
func fingerprint(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(ctx, `
		SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
			FROM information_schema.columns WHERE table_schema = 'public'
		UNION ALL SELECT 'constraint ' || conrelid::regclass || ' ' || pg_get_constraintdef(oid)
			FROM pg_constraint WHERE connamespace = 'public'::regnamespace
		UNION ALL SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
		UNION ALL SELECT 'policy ' || tablename || ' ' || policyname || ' ' || coalesce(qual, '') || ' ' || coalesce(with_check, '')
			FROM pg_policies WHERE schemaname = 'public'
		UNION ALL SELECT 'grant ' || table_name || ' ' || grantee || ' ' || privilege_type
			FROM information_schema.table_privileges WHERE table_schema = 'public' AND grantee = 'cyberos_app'
		UNION ALL SELECT 'column grant ' || table_name || '.' || column_name || ' ' || grantee || ' ' || privilege_type
			FROM information_schema.column_privileges WHERE table_schema = 'public' AND grantee = 'cyberos_app'
		UNION ALL SELECT 'function ' || p.oid::regprocedure || ' ' || md5(p.prosrc) || ' ' || coalesce(p.proacl::text, '')
			FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
		UNION ALL SELECT 'rls ' || relname || ' ' || relrowsecurity FROM pg_class
			WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func TestMigrationRoundTrip(t *testing.T) {
	t.Parallel()
	db := pgtest.Shared(t).NewEmptyDB(t)
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up: %v", err)
	}
	first := fingerprint(t, db.Admin)
	if !strings.Contains(first, "policy mcp_servers servers_rls") {
		t.Fatalf("the schema after Up has no RLS policy:\n%s", first)
	}
	if err := schema.Down(ctx, db.AdminURL, 0); err != nil {
		t.Fatalf("Down to zero: %v", err)
	}
	if left := fingerprint(t, db.Admin); strings.Contains(left, "mcp_") {
		t.Fatalf("Down to zero left:\n%s", left)
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up again: %v", err)
	}
	st, err := schema.Current(ctx, db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	if want := (schema.Status{Version: migrations.Latest, Latest: migrations.Latest, Applied: true, Engine: schema.EnginePostgreSQL}); st != want {
		t.Fatalf("after the round trip: Current = %+v, want %+v", st, want)
	}
	if again := fingerprint(t, db.Admin); again != first {
		t.Fatalf("the schema differs after down and up:\nfirst:\n%s\nagain:\n%s", first, again)
	}
	// The last step down and up again (an operator's rollback of a
	// release): its down leaves the functions for the next up to apply.
	if err := schema.Down(ctx, db.AdminURL, 1); err != nil {
		t.Fatalf("Down one step: %v", err)
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up after one step down: %v", err)
	}
	if again := fingerprint(t, db.Admin); again != first {
		t.Fatalf("the schema differs after one step down and up:\nfirst:\n%s\nagain:\n%s", first, again)
	}
	// Each step down and up again, one at a time.
	for v := migrations.Latest; v > 0; v-- {
		if err := schema.Down(ctx, db.AdminURL, 1); err != nil {
			t.Fatalf("Down from %d: %v", v, err)
		}
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up after stepping down: %v", err)
	}
	if again := fingerprint(t, db.Admin); again != first {
		t.Fatalf("the schema differs after stepping down and up")
	}
}

func TestTemplateCloneIsFast(t *testing.T) {
	pgtest.NewDB(t) // the template, made once
	const n = 5
	var total time.Duration
	for range n {
		start := time.Now()
		pgtest.NewDB(t)
		total += time.Since(start)
	}
	t.Logf("a fresh migrated database (clone of the template, two pools) in %.1f ms on average over %d",
		float64(total.Microseconds())/n/1000, n)
}
