package schema_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/migrations"
	"github.com/cyberos/mcpd/pkg/schema"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

var (
	citusTenantTables = []string{"mcp_servers", "mcp_skills", "mcp_audit_events", "mcp_tenant_servers",
		"mcp_tenant_feed", "mcp_skill_alerts", "mcp_alert_positions"}
	citusReferenceTables = []string{"mcp_cursor_keys"}
	// Written by every sweep and alert claim: plain tables of the
	// coordinator, which a worker that is down does not stop.
	citusCoordinatorTables = []string{"mcp_alert_cursors", "mcp_monitor_state", "mcp_schema_functions",
		"mcp_sweep_tenant_list"}
)

// migrate up on a Citus coordinator distributes the tenant tables by
// tenant_id, colocated, and makes the rest reference tables, in the same
// run; what kept an unmodified mcpd's tables from being distributed
// (shared/citus/README.md: "cannot distribute relation ... because it has
// triggers", keys without the partition column, the skills' foreign key)
// is met again here. A second run changes nothing; status says citus.
func TestUpDistributesOnCitus(t *testing.T) {
	ctx := context.Background()
	c := pgtest.SharedCitus(t)
	db := c.NewEmptyDB(t)
	if got := current(t, db.AdminURL); got.Engine != schema.EngineCitus || got.Applied {
		t.Fatalf("before: %+v, want engine citus, nothing applied", got)
	}
	for range 2 {
		if err := schema.Up(ctx, db.AdminURL); err != nil {
			t.Fatalf("Up: %v", err)
		}
	}
	if got, want := current(t, db.AdminURL), (schema.Status{Version: migrations.Latest, Latest: migrations.Latest,
		Applied: true, Engine: schema.EngineCitus}); got != want {
		t.Fatalf("after: %+v, want %+v", got, want)
	}
	var colocation int64
	for i, table := range citusTenantTables {
		var method, column string
		var group int64
		if err := db.Admin.QueryRow(ctx, `SELECT partmethod::text, column_to_column_name(logicalrelid, partkey), colocationid
			FROM pg_dist_partition WHERE logicalrelid = $1::regclass`, table).Scan(&method, &column, &group); err != nil {
			t.Fatalf("%s: not distributed: %v", table, err)
		}
		if i == 0 {
			colocation = group
		}
		if method != "h" || column != "tenant_id" || group != colocation {
			t.Fatalf("%s: method %s by %s in group %d, want hash by tenant_id in group %d", table, method, column, group, colocation)
		}
	}
	for _, table := range citusReferenceTables {
		var method string
		if err := db.Admin.QueryRow(ctx, `SELECT partmethod::text FROM pg_dist_partition WHERE logicalrelid = $1::regclass`,
			table).Scan(&method); err != nil || method != "n" {
			t.Fatalf("%s: %q, %v; want a reference table", table, method, err)
		}
	}
	for _, table := range citusCoordinatorTables {
		var n int
		if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = $1::regclass`,
			table).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s: in Citus's metadata (%d, %v), want a table of the coordinator", table, n, err)
		}
	}
	// Every key of a tenant table includes tenant_id; no table has a
	// trigger; the shards are on both workers.
	rows, err := db.Admin.Query(ctx, `SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
		FROM pg_constraint WHERE contype IN ('p', 'u', 'f') AND conrelid = ANY ($1::regclass[])`, citusTenantTables)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table, name, def string
		if err := rows.Scan(&table, &name, &def); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(def, "tenant_id") {
			t.Errorf("%s: key %s without tenant_id: %s", table, name, def)
		}
	}
	rows.Close()
	var triggers, workers int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		WHERE NOT t.tgisinternal AND c.relname LIKE 'mcp_%'`).Scan(&triggers); err != nil || triggers != 0 {
		t.Fatalf("%d triggers on mcpd's tables (%v), want none", triggers, err)
	}
	if err := db.Admin.QueryRow(ctx, `SELECT count(DISTINCT nodename || nodeport) FROM pg_dist_shard_placement p
		JOIN pg_dist_shard s USING (shardid) WHERE s.logicalrelid = 'mcp_servers'::regclass`).Scan(&workers); err != nil || workers != 2 {
		t.Fatalf("mcp_servers' shards on %d nodes (%v), want 2", workers, err)
	}

	// One tenant's functions are called on the worker that holds the
	// tenant's shard: Citus says so at DEBUG1.
	cfg, err := pgx.ParseConfig(db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET client_min_messages TO debug1`); err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{
		`SELECT * FROM mcp_heartbeat_healthy_group($1, '{}', '{}', NULL)`,
		`SELECT * FROM mcp_heartbeat_tenant($1, '{}', NULL)`,
		`SELECT * FROM mcp_heartbeat_held($1, '{}', '{}', NULL)`,
		`SELECT * FROM mcp_heartbeat_held_group($1, '{}', '{}', '{}', NULL)`,
		`SELECT * FROM mcp_sweep_tenant($1, NULL, interval '1 minute', interval '2 minutes', 10, interval '0')`,
		`SELECT mcp_sweep_mark_group($1, '{}', NULL, interval '1 minute')`,
		`SELECT * FROM mcp_register($1, '00000000-0000-4000-8000-000000000001', 'module', '1.0.0', '{}', NULL, NULL, '[]', NULL, NULL,
			'{}', '{}', 0, NULL)`,
		`SELECT * FROM mcp_register_group($1, '{}', '{}', '[]', '{}', NULL)`,
		`SELECT * FROM mcp_deregister($1, '00000000-0000-4000-8000-000000000001', NULL)`,
	} {
		notices = nil
		if _, err := conn.Exec(ctx, call, uuid.New()); err != nil {
			t.Fatalf("%s: %v", call, err)
		}
		if !slices.Contains(notices, "pushing down the function call") {
			t.Errorf("%s: not handed to a worker; Citus said %q", call, notices)
		}
	}
	conn.Close(ctx)

	// A function that another build left is replaced on every node.
	workersSay := func(query string) []string {
		t.Helper()
		rows, err := db.Admin.Query(ctx, `SELECT success, result FROM run_command_on_workers($1)`, query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var ok bool
			var result string
			if err := rows.Scan(&ok, &result); err != nil || !ok {
				t.Fatalf("on a worker: %s: %s %v", query, result, err)
			}
			out = append(out, result)
		}
		return out
	}
	const year = `SELECT extract(year FROM mcp_now(NULL))::int`
	if _, err := db.Admin.Exec(ctx, `CREATE OR REPLACE FUNCTION mcp_now(p_now timestamptz) RETURNS timestamptz
		LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN '2000-01-01T00:00:00Z'; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `UPDATE mcp_schema_functions SET digest = 'another build'`); err != nil {
		t.Fatal(err)
	}
	if got := workersSay(year); len(got) != 2 || got[0] != "2000" || got[1] != "2000" {
		t.Fatalf("the other build's mcp_now on the workers: %v, want 2000 on both", got)
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up over another build's functions: %v", err)
	}
	for _, y := range workersSay(year) {
		if y == "2000" {
			t.Fatalf("after Up a worker still has the other build's mcp_now")
		}
	}
}

// On plain PostgreSQL nothing is distributed and the design's keys stay.
func TestUpOnPlainPostgreSQL(t *testing.T) {
	db := pgtest.NewDB(t)
	if got := current(t, db.AdminURL); got.Engine != schema.EnginePostgreSQL {
		t.Fatalf("engine %q, want postgresql", got.Engine)
	}
	var def string
	if err := db.Admin.QueryRow(context.Background(), `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conname = 'mcp_servers_pkey'`).Scan(&def); err != nil || def != "PRIMARY KEY (server_id)" {
		t.Fatalf("mcp_servers' key: %q, %v; want the design's PRIMARY KEY (server_id)", def, err)
	}
}
