-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- The unhealthy servers of the tenants p_tenants (NULL: every tenant,
-- which mcp_unhealthy_servers is): read per Citus worker while a worker
-- is down (see mcp_alert_claim_of). Each table is
-- filtered by p_tenants: Citus prunes the shards of each by its own.
CREATE OR REPLACE FUNCTION mcp_unhealthy_servers_of(p_tenants uuid[])
 RETURNS TABLE(server_id uuid, tenant_id uuid, module_name text, version text, last_heartbeat_at timestamp with time zone, trace_id text, unhealthy_since timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.server_id, s.tenant_id, s.module_name, s.version, s.last_heartbeat_at, s.trace_id::text,
               (SELECT max(e.occurred_at) FROM mcp_audit_events e
                 WHERE e.tenant_id = s.tenant_id AND (p_tenants IS NULL OR e.tenant_id = ANY (p_tenants)) AND e.server_id = s.server_id AND e.kind = 'mcp.server.unhealthy')
        FROM mcp_servers s
        WHERE (p_tenants IS NULL OR s.tenant_id = ANY (p_tenants)) AND s.status = 'unhealthy';
END
$function$;

REVOKE ALL ON FUNCTION mcp_unhealthy_servers_of(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_unhealthy_servers_of(uuid[]) TO cyberos_app;
