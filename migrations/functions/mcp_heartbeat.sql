-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_heartbeat(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone)
 RETURNS TABLE(o_tenant_id uuid, o_server_id uuid, o_prev_status text, s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
-- Then the counters of the tenants whose servers recover (their events
-- take positions), in tenant_id order, as every writer of several tenants
-- takes them: after the servers, as every writer takes them.
PERFORM 1 FROM mcp_tenant_feed f
WHERE f.tenant_id IN (
    SELECT s.tenant_id FROM mcp_servers s
    JOIN unnest(p_tenants, p_servers) AS r(tenant_id, server_id)
      ON s.server_id = r.server_id AND s.tenant_id = r.tenant_id
    WHERE s.status IN ('degraded', 'unhealthy'))
ORDER BY f.tenant_id
FOR UPDATE OF f;

RETURN QUERY
WITH prev AS (
    SELECT DISTINCT s.server_id, s.tenant_id, s.status
    FROM mcp_servers s
    JOIN unnest(p_tenants, p_servers) AS r(tenant_id, server_id)
      ON s.server_id = r.server_id AND s.tenant_id = r.tenant_id
), upd AS (
    UPDATE mcp_servers s
    SET last_heartbeat_at = v_now, status = 'healthy',
        status_changed_at = CASE WHEN p.status = 'healthy' THEN s.status_changed_at ELSE v_now END
    FROM prev p
    WHERE s.server_id = p.server_id AND p.status <> 'deregistered'
    RETURNING s.server_id, s.tenant_id, s.module_name, s.version, s.supported_protocols,
              s.capability_advertisement, s.status, s.last_heartbeat_at, s.registered_at,
              s.deregistered_at, s.trace_id, s.remotes, s.description, s.title, p.status AS from_status
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
         trace_id, occurred_at, body, position)
    SELECT gen_random_uuid(), u.tenant_id, 'mcp.server.recovered', u.server_id, u.module_name,
           u.from_status, u.status, u.trace_id, u.last_heartbeat_at,
           mcp_audit_body(u.server_id, u.module_name, u.status, u.version, u.supported_protocols,
                          (SELECT jsonb_agg(x.name ORDER BY x.name) FROM restored x WHERE x.server_id = u.server_id)),
           mcp_feed_next(u.tenant_id, 'mcp.server.recovered', u.from_status)
    FROM upd u
    WHERE u.from_status IN ('degraded', 'unhealthy')
    ORDER BY u.tenant_id, u.server_id
    RETURNING mcp_audit_events.seq, mcp_audit_events.event_id, mcp_audit_events.tenant_id,
              mcp_audit_events.kind, mcp_audit_events.server_id, mcp_audit_events.module_name,
              mcp_audit_events.from_status, mcp_audit_events.to_status,
              mcp_audit_events.trace_id, mcp_audit_events.occurred_at, mcp_audit_events.body
)
SELECT p.tenant_id, p.server_id, p.status,
       u.server_id, u.tenant_id, u.module_name, u.version, u.supported_protocols,
       u.capability_advertisement, u.status, u.last_heartbeat_at, u.registered_at,
       u.deregistered_at, u.trace_id::text, u.remotes, u.description, u.title,
       e.seq, e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
       e.to_status, e.trace_id::text, e.occurred_at, e.body
FROM prev p
LEFT JOIN upd u ON u.server_id = p.server_id
LEFT JOIN ev e ON e.server_id = p.server_id;
END
$function$;

REVOKE ALL ON FUNCTION mcp_heartbeat(uuid[],uuid[],timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat(uuid[],uuid[],timestamp with time zone) TO cyberos_app;
