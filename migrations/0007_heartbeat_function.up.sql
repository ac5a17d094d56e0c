-- The heartbeat path's batch: the heartbeats that mcpd gathered for one
-- commit (group commit), across tenants, applied by one call. Before this,
-- a batch sent three statements per tenant (set the tenant, lock, update),
-- because row-level security scopes a statement to one tenant; heartbeats
-- of a large fleet rarely share a tenant within a batch, so a batch shared
-- its commit but not its statements (docs/performance.md, "The heartbeat
-- batch").
--
-- The function runs as the tables' owner, like mcp_sweep, and takes the
-- (tenant, server) pairs that mcpd has authenticated: the tenant of each
-- comes from the caller's token alone. Every statement joins on both columns,
-- so a server id under another tenant is not found, exactly as RLS makes it
-- for a statement scoped to the tenant. It does what the per-tenant
-- statements did and nothing else: record the heartbeat, recover a degraded
-- or unhealthy server, give back the skills the monitor's cascade took, and
-- audit each recovery, all in one statement, so in one transaction.
CREATE FUNCTION mcp_heartbeat(
    p_tenants uuid[],
    p_servers uuid[],
    p_now     timestamptz
)
RETURNS TABLE (
    o_tenant_id       uuid,
    o_server_id       uuid,
    o_prev_status     text,
    -- the server after the heartbeat (NULL when it was deregistered)
    s_server_id       uuid,
    s_tenant_id       uuid,
    s_module_name     text,
    s_version         text,
    s_protocols       text[],
    s_capabilities    jsonb,
    s_status          text,
    s_last_heartbeat  timestamptz,
    s_registered_at   timestamptz,
    s_deregistered_at timestamptz,
    s_trace_id        text,
    -- the recovery's audit event (NULL when there was none)
    e_seq             bigint,
    e_event_id        uuid,
    e_tenant_id       uuid,
    e_kind            text,
    e_server_id       uuid,
    e_module_name     text,
    e_from_status     text,
    e_to_status       text,
    e_trace_id        text,
    e_occurred_at     timestamptz,
    e_body            jsonb
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
-- One plan, kept: a batch is at most a few hundred pairs, which the
-- generic plan (primary-key lookups in nested loops) serves at any size.
-- Left to choose, PostgreSQL plans the statement again on every call (its
-- custom plans look cheaper on paper), and planning the statement costs more
-- than running it: 0.6 ms against 0.2 ms per one-heartbeat call, measured
-- with pgbench (docs/performance.md).
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now timestamptz := COALESCE(p_now, now());
BEGIN
-- Lock first, in server_id order (so that concurrent batches cannot
-- deadlock), in a statement of its own: the next statement then takes its
-- snapshot after any sweep that held these rows has committed, and sees the
-- skills that sweep took away.
PERFORM 1
FROM mcp_servers s
JOIN unnest(p_tenants, p_servers) AS r(tenant_id, server_id)
  ON s.server_id = r.server_id AND s.tenant_id = r.tenant_id
ORDER BY s.server_id
FOR UPDATE OF s;

RETURN QUERY
WITH prev AS (
    SELECT DISTINCT s.server_id, s.tenant_id, s.status
    FROM mcp_servers s
    JOIN unnest(p_tenants, p_servers) AS r(tenant_id, server_id)
      ON s.server_id = r.server_id AND s.tenant_id = r.tenant_id
), upd AS (
    UPDATE mcp_servers s
    SET last_heartbeat_at = v_now, status = 'healthy'
    FROM prev p
    WHERE s.server_id = p.server_id AND p.status <> 'deregistered'
    RETURNING s.server_id, s.tenant_id, s.module_name, s.version, s.supported_protocols,
              s.capability_advertisement, s.status, s.last_heartbeat_at, s.registered_at,
              s.deregistered_at, s.trace_id, p.status AS from_status
), restored AS (
    UPDATE mcp_skills k
    SET available = true, unavailable_reason = NULL
    FROM upd u
    WHERE k.server_id = u.server_id AND u.from_status = 'unhealthy'
      AND k.unavailable_reason = 'server_unhealthy'
    RETURNING k.server_id, k.name
), ev AS (
    INSERT INTO mcp_audit_events
        (event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
         trace_id, occurred_at, body)
    SELECT gen_random_uuid(), u.tenant_id, 'mcp.server.recovered', u.server_id, u.module_name,
           u.from_status, u.status, u.trace_id, u.last_heartbeat_at,
           jsonb_build_object(
               'server_id', u.server_id,
               'module_name', u.module_name,
               'status', u.status,
               'version', u.version,
               'supported_protocols', to_jsonb(u.supported_protocols),
               'skills_affected', COALESCE((SELECT jsonb_agg(x.name ORDER BY x.name)
                                            FROM restored x WHERE x.server_id = u.server_id),
                                           '[]'::jsonb))
    FROM upd u
    WHERE u.from_status IN ('degraded', 'unhealthy')
    RETURNING mcp_audit_events.seq, mcp_audit_events.event_id, mcp_audit_events.tenant_id,
              mcp_audit_events.kind, mcp_audit_events.server_id, mcp_audit_events.module_name,
              mcp_audit_events.from_status, mcp_audit_events.to_status,
              mcp_audit_events.trace_id, mcp_audit_events.occurred_at, mcp_audit_events.body
)
SELECT p.tenant_id, p.server_id, p.status,
       u.server_id, u.tenant_id, u.module_name, u.version, u.supported_protocols,
       u.capability_advertisement, u.status, u.last_heartbeat_at, u.registered_at,
       u.deregistered_at, u.trace_id::text,
       e.seq, e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
       e.to_status, e.trace_id::text, e.occurred_at, e.body
FROM prev p
LEFT JOIN upd u ON u.server_id = p.server_id
LEFT JOIN ev e ON e.server_id = p.server_id;
END
$fn$;

REVOKE ALL ON FUNCTION mcp_heartbeat(uuid[], uuid[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat(uuid[], uuid[], timestamptz) TO cyberos_app;

-- The common case first: a heartbeat of a server that is healthy and stays
-- so. One UPDATE locks and records them and returns each server as it is
-- now; mcpd sends what it does not return (servers degraded, unhealthy,
-- deregistered or not found under that tenant) to mcp_heartbeat. A server
-- that a sweep is moving at that moment is waited for and, once the sweep
-- has committed, no longer healthy: it is left for mcp_heartbeat, which
-- recovers it. Half again the heartbeats per second of mcp_heartbeat alone,
-- measured with pgbench (docs/performance.md). Rows are locked in the order
-- of the arrays, which mcpd sorts by server_id.
CREATE FUNCTION mcp_heartbeat_healthy(
    p_tenants uuid[],
    p_servers uuid[],
    p_now     timestamptz
)
RETURNS TABLE (
    s_server_id       uuid,
    s_tenant_id       uuid,
    s_module_name     text,
    s_version         text,
    s_protocols       text[],
    s_capabilities    jsonb,
    s_status          text,
    s_last_heartbeat  timestamptz,
    s_registered_at   timestamptz,
    s_deregistered_at timestamptz,
    s_trace_id        text
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
SET plan_cache_mode = force_generic_plan -- as mcp_heartbeat
AS $fn$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH upd AS (
    UPDATE mcp_servers s
    SET last_heartbeat_at = COALESCE(p_now, now())
    FROM unnest(p_tenants, p_servers) AS r(tenant_id, server_id)
    WHERE s.server_id = r.server_id AND s.tenant_id = r.tenant_id AND s.status = 'healthy'
    RETURNING s.server_id, s.tenant_id, s.module_name, s.version, s.supported_protocols,
              s.capability_advertisement, s.status, s.last_heartbeat_at, s.registered_at,
              s.deregistered_at, s.trace_id::text AS trace_id
)
SELECT u.server_id, u.tenant_id, u.module_name, u.version, u.supported_protocols,
       u.capability_advertisement, u.status, u.last_heartbeat_at, u.registered_at,
       u.deregistered_at, u.trace_id
FROM upd u;
END
$fn$;

REVOKE ALL ON FUNCTION mcp_heartbeat_healthy(uuid[], uuid[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat_healthy(uuid[], uuid[], timestamptz) TO cyberos_app;
