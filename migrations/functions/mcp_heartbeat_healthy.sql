-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_heartbeat_healthy(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone)
 RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
              s.deregistered_at, s.trace_id::text AS trace_id, s.remotes, s.description, s.title
)
SELECT u.server_id, u.tenant_id, u.module_name, u.version, u.supported_protocols,
       u.capability_advertisement, u.status, u.last_heartbeat_at, u.registered_at,
       u.deregistered_at, u.trace_id, u.remotes, u.description, u.title
FROM upd u;
END
$function$;

REVOKE ALL ON FUNCTION mcp_heartbeat_healthy(uuid[],uuid[],timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat_healthy(uuid[],uuid[],timestamp with time zone) TO cyberos_app;
