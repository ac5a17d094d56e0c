package bench

import (
	"context"
	"crypto/md5"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/schema"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// The seeded fleet is deterministic, so that pgbench's script and the load
// driver can name any server without reading the table: tenant t (from 1)
// is md5('tenant' || t)::uuid, its module m (from 1) is "module-m", and
// that server is number n = (t-1)*modules + m, with server_id
// md5('server' || n)::uuid. A big tenant (for paging) has its own names.

// TenantID is the id of seeded tenant t (from 1).
func TenantID(t int) uuid.UUID { return md5UUID("tenant" + strconv.Itoa(t)) }

// ServerID is the id of seeded server n (from 1).
func ServerID(n int) uuid.UUID { return md5UUID("server" + strconv.Itoa(n)) }

// BigTenantID is the tenant that holds the big fleet of SeedBigTenant.
func BigTenantID() uuid.UUID { return md5UUID("big-tenant") }

func md5UUID(s string) uuid.UUID { return uuid.UUID(md5.Sum([]byte(s))) }

// AppRole is the login role the harness gives mcpd and the sweep: a member
// of cyberos_app and of nothing else, as the contract asks of mcpd's role.
const AppRole = "mcpd_bench_app"

// Database is the harness's database.
const Database = "mcpd_bench"

// SetUp creates the harness's database on the cluster, migrates it to the
// latest schema version and creates AppRole.
func SetUp(ctx context.Context, pg *pgtest.Cluster) error {
	admin, err := pgxpool.New(ctx, pg.URL("postgres", "postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer admin.Close()
	for _, q := range []string{
		`CREATE DATABASE ` + Database,
		`CREATE ROLE ` + AppRole + ` LOGIN INHERIT NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION`,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	if err := schema.Up(ctx, pg.URL("postgres", Database)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := admin.Exec(ctx, `GRANT cyberos_app TO `+AppRole); err != nil {
		return fmt.Errorf("grant cyberos_app: %w", err)
	}
	return nil
}

// SeedServers inserts the healthy servers of tenants from..to (inclusive) with
// modules each, heartbeating at at, with two skills each when skills is set,
// and analyzes the tables.
func SeedServers(ctx context.Context, admin *pgxpool.Pool, from, to, modules int, at time.Time, skills bool) error {
	if _, err := admin.Exec(ctx, `
INSERT INTO mcp_servers (server_id, tenant_id, module_name, version, supported_protocols, status,
                         last_heartbeat_at, registered_at, trace_id)
SELECT md5('server' || ((t - 1) * $3 + m))::uuid, md5('tenant' || t)::uuid, 'module-' || m, '1.0.0',
       ARRAY['2025-06-18'], 'healthy', $4, $4, md5(t || '/' || m)
FROM generate_series($1::int, $2::int) t, generate_series(1, $3::int) m`, from, to, modules, at); err != nil {
		return fmt.Errorf("seed servers: %w", err)
	}
	if skills {
		if _, err := admin.Exec(ctx, `
INSERT INTO mcp_skills (skill_id, tenant_id, server_id, name)
SELECT gen_random_uuid(), s.tenant_id, s.server_id, k.name
FROM mcp_servers s, (VALUES ('search'), ('summarize')) k(name)
WHERE s.tenant_id IN (SELECT md5('tenant' || t)::uuid FROM generate_series($1::int, $2::int) t)`, from, to); err != nil {
			return fmt.Errorf("seed skills: %w", err)
		}
	}
	return analyze(ctx, admin)
}

// SeedBigTenant inserts servers healthy servers (two skills each) of
// BigTenantID, modules "big-00001"..., heartbeating at at.
func SeedBigTenant(ctx context.Context, admin *pgxpool.Pool, servers int, at time.Time) error {
	if _, err := admin.Exec(ctx, `
WITH s AS (
    INSERT INTO mcp_servers (server_id, tenant_id, module_name, version, supported_protocols, status,
                             last_heartbeat_at, registered_at, trace_id)
    SELECT md5('big-server' || m)::uuid, $1, 'big-' || lpad(m::text, 5, '0'), '1.0.0', ARRAY['2025-06-18'],
           'healthy', $3, $3, md5('big/' || m)
    FROM generate_series(1, $2::int) m
    RETURNING server_id, tenant_id
)
INSERT INTO mcp_skills (skill_id, tenant_id, server_id, name)
SELECT gen_random_uuid(), s.tenant_id, s.server_id, k.name
FROM s, (VALUES ('search'), ('summarize')) k(name)`, BigTenantID(), servers, at); err != nil {
		return fmt.Errorf("seed big tenant: %w", err)
	}
	return analyze(ctx, admin)
}

func analyze(ctx context.Context, admin *pgxpool.Pool) error {
	for _, t := range []string{"mcp_servers", "mcp_skills", "mcp_audit_events"} {
		if _, err := admin.Exec(ctx, `VACUUM ANALYZE `+t); err != nil {
			return fmt.Errorf("vacuum %s: %w", t, err)
		}
	}
	return nil
}

// ResetFleet puts every server back to healthy, heartbeating at at, with
// every skill available, and vacuums.
func ResetFleet(ctx context.Context, admin *pgxpool.Pool, at time.Time) error {
	if _, err := admin.Exec(ctx, `UPDATE mcp_servers SET status = 'healthy', last_heartbeat_at = $1, deregistered_at = NULL`, at); err != nil {
		return fmt.Errorf("reset servers: %w", err)
	}
	if _, err := admin.Exec(ctx, `UPDATE mcp_skills SET available = true, unavailable_reason = NULL WHERE NOT available`); err != nil {
		return fmt.Errorf("reset skills: %w", err)
	}
	return analyze(ctx, admin)
}

// serverCount counts the rows of mcp_servers.
func serverCount(ctx context.Context, admin *pgxpool.Pool) (int64, error) {
	var n int64
	err := admin.QueryRow(ctx, `SELECT count(*) FROM mcp_servers`).Scan(&n)
	return n, err
}
