-- The monitor's sweep: one pass over every tenant, with the least privilege
-- that works. cyberos_app has no BYPASSRLS; it may only execute this function,
-- which runs as the tables' owner, with a fixed search_path, and does the
-- sweep and nothing else.
--
-- Each transition is decided by the same conditional UPDATE that applies it:
-- a heartbeat that commits first makes the row no longer match (the locked
-- row is re-checked at its newest version), a row that a heartbeat or another
-- sweeper holds right now is skipped (SKIP LOCKED: the heartbeat wins, the
-- other sweeper moves it), so several sweepers never wait on each other or
-- deadlock with heartbeats, and each transition is applied once. Unhealthy servers' available skills become
-- unavailable ('server_unhealthy') and every transition gets its audit event,
-- all in this one statement, so in one transaction.
CREATE FUNCTION mcp_sweep(
    p_now             timestamptz,
    p_degraded_after  interval,
    p_unhealthy_after interval,
    p_limit           integer
)
RETURNS TABLE (
    event_id    uuid,
    tenant_id   uuid,
    kind        text,
    server_id   uuid,
    module_name text,
    from_status text,
    to_status   text,
    trace_id    text,
    occurred_at timestamptz,
    body        jsonb
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
-- Planned with the actual thresholds each call, so that the planner sees how
-- few rows are due and reads them through mcp_servers_sweep_idx; a generic
-- plan would guess a third of the table and scan all of it.
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now             timestamptz := COALESCE(p_now, now());
    v_degraded_before timestamptz := v_now - p_degraded_after;
    v_unhealthy_before timestamptz := v_now - p_unhealthy_after;
    v_rows            tid[];
    v_ids             uuid[];
    v_from            text[];
BEGIN
-- First lock what is due and keep it in arrays: the statement below is then
-- planned knowing how many rows it moves (a mass outage moves thousands,
-- and joins planned for one row would cost seconds).
SELECT array_agg(d.row_id), array_agg(d.server_id), array_agg(d.status)
INTO v_rows, v_ids, v_from
FROM (
    SELECT s.ctid AS row_id, s.server_id, s.status
    FROM mcp_servers s
    WHERE (s.status = 'healthy' AND s.last_heartbeat_at <= v_degraded_before)
       OR (s.status = 'degraded' AND s.last_heartbeat_at <= v_unhealthy_before)
    LIMIT p_limit
    FOR UPDATE OF s SKIP LOCKED
) d;
IF v_ids IS NULL THEN
    RETURN;
END IF;
RETURN QUERY
WITH due AS (
    SELECT d.server_id, d.status FROM unnest(v_ids, v_from) AS d(server_id, status)
),
-- The rows are locked and unchanged since they were read: updated by their
-- row ids (a TID scan, no index probes), their previous status from due.
moved AS (
    UPDATE mcp_servers s
    SET status = CASE WHEN s.last_heartbeat_at <= v_unhealthy_before
                      THEN 'unhealthy' ELSE 'degraded' END
    WHERE s.ctid = ANY (v_rows)
    RETURNING s.server_id, s.tenant_id, s.module_name, s.status AS to_status, s.trace_id, s.version,
              s.supported_protocols, v_now AS now
),
cascaded AS (
    UPDATE mcp_skills k
    SET available = false, unavailable_reason = 'server_unhealthy'
    FROM moved m
    WHERE k.server_id = m.server_id AND m.to_status = 'unhealthy' AND k.available
    RETURNING k.server_id, k.name
),
affected AS (
    SELECT a.server_id, array_agg(a.name ORDER BY a.name) AS names
    FROM cascaded a
    GROUP BY a.server_id
),
events AS (
    INSERT INTO mcp_audit_events
        (event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
         trace_id, occurred_at, body)
    SELECT gen_random_uuid(), m.tenant_id, 'mcp.server.' || m.to_status, m.server_id,
           m.module_name, d.status, m.to_status, m.trace_id, m.now,
           jsonb_build_object(
               'server_id', m.server_id,
               'module_name', m.module_name,
               'status', m.to_status,
               'version', m.version,
               'supported_protocols', to_jsonb(m.supported_protocols),
               'skills_affected', COALESCE(to_jsonb(a.names), '[]'::jsonb))
    FROM moved m
    JOIN due d ON d.server_id = m.server_id
    LEFT JOIN affected a ON a.server_id = m.server_id
    RETURNING mcp_audit_events.seq, mcp_audit_events.event_id, mcp_audit_events.tenant_id,
              mcp_audit_events.kind, mcp_audit_events.server_id, mcp_audit_events.module_name,
              mcp_audit_events.from_status, mcp_audit_events.to_status,
              mcp_audit_events.trace_id, mcp_audit_events.occurred_at, mcp_audit_events.body
)
SELECT e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
       e.to_status, e.trace_id::text, e.occurred_at, e.body
FROM events e
ORDER BY e.seq;
END
$fn$;

REVOKE ALL ON FUNCTION mcp_sweep(timestamptz, interval, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep(timestamptz, interval, interval, integer) TO cyberos_app;

-- Servers per status across every tenant, for mcpd's metrics; counts only.
CREATE FUNCTION mcp_status_counts()
RETURNS TABLE (status text, servers bigint)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT s.status, count(*) FROM mcp_servers s GROUP BY s.status;
$fn$;

REVOKE ALL ON FUNCTION mcp_status_counts() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_status_counts() TO cyberos_app;
