package schema

import (
	"context"
	"database/sql"
	"fmt"
)

// Engines that Engine reports.
const (
	// EnginePostgreSQL is one PostgreSQL primary: the schema as the
	// migrations write it.
	EnginePostgreSQL = "postgresql"
	// EngineCitus is a Citus coordinator (the extension citus in the
	// database): the tenant tables distributed by tenant_id, colocated, the
	// rest reference tables.
	EngineCitus = "citus"
)

// tenantTables are distributed by tenant_id, colocated with the first:
// every statement of one tenant runs on one shard group.
var tenantTables = []string{
	"mcp_servers", "mcp_skills", "mcp_audit_events", "mcp_tenant_servers", "mcp_tenant_feed",
	"mcp_skill_alerts", "mcp_alert_positions",
}

// referenceTables are copied to every node: small, and read by every
// tenant's statements. The tables that every sweep or alert claim writes,
// mcp_monitor_state (the blind window) and mcp_alert_cursors (the leases),
// stay plain tables of the coordinator: a write of a reference table needs
// every node, and a worker that is down would stop every tenant's sweep.
// So does mcp_sweep_tenant_list, the sweep's last list of tenants, read
// while a worker is down.
var referenceTables = []string{"mcp_cursor_keys"}

// widenKeys are the keys of the design that do not include tenant_id,
// which a distributed table cannot have, and the columns of their wider
// form. Plain PostgreSQL keeps the design's keys.
var widenKeys = []struct{ table, constraint, columns string }{
	{"mcp_servers", "mcp_servers_pkey", "tenant_id, server_id"},
	{"mcp_skills", "mcp_skills_pkey", "tenant_id, skill_id"},
	{"mcp_audit_events", "mcp_audit_events_pkey", "tenant_id, seq"},
}

// delegatedFunctions run one tenant's statements, and take the tenant as
// their argument p_tenant: Citus hands a call of one of them, whole, to the
// worker that holds the tenant's shard (function call delegation), which
// runs its statements next to the data, instead of the coordinator planning
// each statement and sending it over. Only functions called as a
// statement of their own (not inside BEGIN ... COMMIT) are delegated.
var delegatedFunctions = []string{
	"mcp_heartbeat_healthy_group(uuid, uuid[], uuid[], timestamptz)",
	"mcp_heartbeat_tenant(uuid, uuid[], timestamptz)",
	"mcp_heartbeat_held(uuid, uuid[], bigint[], timestamptz)",
	"mcp_heartbeat_held_group(uuid, uuid[], uuid[], bigint[], timestamptz)",
	"mcp_sweep_tenant(uuid, timestamptz, interval, interval, integer, interval)",
	"mcp_sweep_mark_group(uuid, uuid[], timestamptz, interval)",
	"mcp_sweep_group(uuid, uuid[], timestamptz, interval, interval, integer, interval)",
	"mcp_register(uuid, uuid, text, text, text[], jsonb, text, jsonb, text, text, text[], text[], integer, timestamptz)",
	"mcp_register_group(uuid, uuid[], uuid[], jsonb, integer[], timestamptz)",
	"mcp_deregister(uuid, uuid, timestamptz)",
}

// onePoolFunctions read every shard (or many) at every sweep: on Citus they
// run with citus.max_adaptive_executor_pool_size 1, so that a worker's
// shards are read one after another on the session's one cached
// connection to it. Citus's default opens more connections to a worker
// while tasks wait (up to 16) and closes all but one when the statement
// ends: under load, new worker connections at every sweep (measured, 300
// tenants due at 1 s with two replicas: 993 sessions opened and 109
// sweeps out of time in 2 minutes, against 576 and 49 with one). Set by
// ALTER FUNCTION here rather than in the functions' files: on plain
// PostgreSQL the parameter is unknown, and a migrating role that is not
// a superuser may not set it. mcpd's sessions set it as well
// (pkg/pgsession) unless the operator did; these functions keep 1 either
// way.
var onePoolFunctions = []string{
	"mcp_sweep_tenants()",
	"mcp_sweep_due(timestamptz, interval, interval)",
	"mcp_sweep_due_of(uuid[], timestamptz, interval, interval)",
}

// delegate sets onePoolFunctions' pool size and marks delegatedFunctions,
// on a Citus coordinator, as
// distributed by their tenant, colocated with the tenant tables; functions
// marked already are left alone. It runs after the
// functions are (re)created, which keeps the mark.
func delegate(ctx context.Context, db *sql.DB) error {
	for _, fn := range onePoolFunctions {
		if _, err := db.ExecContext(ctx, `ALTER FUNCTION `+fn+` SET citus.max_adaptive_executor_pool_size = 1`); err != nil {
			return fmt.Errorf("%s: %w", fn, err)
		}
	}
	for _, fn := range delegatedFunctions {
		var marked bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_object
			WHERE classid = 'pg_proc'::regclass AND objid = $1::regprocedure AND distribution_argument_index IS NOT NULL)`,
			fn).Scan(&marked); err != nil {
			return fmt.Errorf("%s: %w", fn, err)
		}
		if marked {
			continue
		}
		if _, err := db.ExecContext(ctx, `SELECT create_distributed_function($1, 'p_tenant', colocate_with => $2)`,
			fn, tenantTables[0]); err != nil {
			return fmt.Errorf("delegate %s: %w", fn, err)
		}
	}
	return nil
}

// functionsOnCoordinatorOnly reports whether mcpd's functions are missing
// from the workers of a Citus coordinator: none of them is in Citus's
// metadata of the objects it keeps on every node, as when they were made
// while the database had no extension (an installation moved onto Citus),
// or not yet.
func functionsOnCoordinatorOnly(ctx context.Context, db *sql.DB) (bool, error) {
	var onWorkers bool
	err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid
		WHERE o.classid = 'pg_proc'::regclass AND p.proname LIKE 'mcp\_%')`).Scan(&onWorkers)
	return !onWorkers, err
}

// isCitus reports whether the database has the citus extension.
func isCitus(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (bool, error) {
	var ok bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&ok)
	return ok, err
}

// distribute makes the schema Citus's, on a Citus coordinator: it widens
// the keys that must include tenant_id, distributes the tenant tables by
// tenant_id (colocated) and makes the cursor key a reference table, in one
// transaction, moving their rows into the shards; tables already
// distributed are left alone, so that it runs after every migrate up.
// Column grants do not reach the shards
// (Citus refuses them), so cyberos_app's UPDATE is granted on the tables;
// row-level security still confines it to its tenant.
func distribute(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	distributed := func(table string) (bool, error) {
		var ok bool
		err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1::regclass)`,
			table).Scan(&ok)
		return ok, err
	}
	exec := func(stmt string) error {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
		return nil
	}
	done, err := distributed(tenantTables[0])
	if err != nil {
		return err
	}
	// moved are the tables this run distributes.
	var moved []string
	if !done {
		// The skills' foreign key names the servers' key: dropped, and
		// made again on the wider key once both tables are distributed.
		if err := exec(`ALTER TABLE mcp_skills DROP CONSTRAINT IF EXISTS mcp_skills_server_fk`); err != nil {
			return err
		}
		for _, k := range widenKeys {
			if err := exec(fmt.Sprintf(`ALTER TABLE %s DROP CONSTRAINT %s, ADD CONSTRAINT %s PRIMARY KEY (%s)`,
				k.table, k.constraint, k.constraint, k.columns)); err != nil {
				return err
			}
		}
	}
	for i, table := range tenantTables {
		ok, err := distributed(table)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		stmt := fmt.Sprintf(`SELECT create_distributed_table('%s', 'tenant_id')`, table)
		if i > 0 {
			stmt = fmt.Sprintf(`SELECT create_distributed_table('%s', 'tenant_id', colocate_with => '%s')`, table, tenantTables[0])
		}
		if err := exec(stmt); err != nil {
			return err
		}
		moved = append(moved, table)
	}
	if !done {
		if err := exec(`ALTER TABLE mcp_skills ADD CONSTRAINT mcp_skills_server_fk
			FOREIGN KEY (tenant_id, server_id) REFERENCES mcp_servers (tenant_id, server_id)`); err != nil {
			return err
		}
		if err := exec(`GRANT UPDATE ON mcp_servers, mcp_skills, mcp_tenant_servers, mcp_tenant_feed TO cyberos_app`); err != nil {
			return err
		}
	}
	for _, table := range referenceTables {
		ok, err := distributed(table)
		if err != nil {
			return err
		}
		if !ok {
			if err := exec(fmt.Sprintf(`SELECT create_reference_table('%s')`, table)); err != nil {
				return err
			}
			moved = append(moved, table)
		}
	}
	// Distributing a table copies its rows into the shards and leaves
	// them on the coordinator too, unseen but on its disk: a database
	// that already held a fleet (docs/scaling.md, "Moving a running
	// installation onto Citus") would keep a second copy of it there.
	for _, table := range moved {
		if err := exec(fmt.Sprintf(`SELECT truncate_local_data_after_distributing_table('%s')`, table)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Engine reports what the database at databaseURL is: EngineCitus when it
// has the citus extension, else EnginePostgreSQL.
func Engine(ctx context.Context, databaseURL string) (string, error) {
	connector, _, _, err := prepareConn(ctx, databaseURL)
	if err != nil {
		return "", err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	ok, err := isCitus(ctx, db)
	if err != nil {
		return "", fmt.Errorf("detect citus: %w", shortError(err))
	}
	if ok {
		return EngineCitus, nil
	}
	return EnginePostgreSQL, nil
}
