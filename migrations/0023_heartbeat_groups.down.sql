DROP FUNCTION IF EXISTS mcp_heartbeat_healthy_group(uuid, uuid[], uuid[], timestamptz);
-- The functions are no longer the set that any build applied: the next
-- migrate up (this build's or the previous one's) applies its own.
DELETE FROM mcp_schema_functions;

-- mcp_heartbeat_healthy_tenant as functions/ last defined it (0022).
CREATE OR REPLACE FUNCTION mcp_heartbeat_healthy_tenant(p_tenant uuid, p_servers uuid[], p_now timestamp with time zone)
 RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_now timestamptz := COALESCE(p_now, now());
BEGIN
    RETURN QUERY
    UPDATE mcp_servers s
    SET last_heartbeat_at = v_now
    WHERE s.tenant_id = p_tenant AND s.server_id = ANY (p_servers) AND s.status = 'healthy'
    RETURNING s.server_id, s.tenant_id, s.module_name, s.version, s.supported_protocols,
              s.capability_advertisement, s.status, s.last_heartbeat_at, s.registered_at,
              s.deregistered_at, s.trace_id::text, s.remotes, s.description, s.title;
END
$function$;

REVOKE ALL ON FUNCTION mcp_heartbeat_healthy_tenant(uuid,uuid[],timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat_healthy_tenant(uuid,uuid[],timestamp with time zone) TO cyberos_app;
