-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_unhealthy_servers()
 RETURNS TABLE(server_id uuid, tenant_id uuid, module_name text, version text, last_heartbeat_at timestamp with time zone, trace_id text, unhealthy_since timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.server_id, s.tenant_id, s.module_name, s.version, s.last_heartbeat_at, s.trace_id::text,
               (SELECT max(e.occurred_at) FROM mcp_audit_events e
                 WHERE e.tenant_id = s.tenant_id AND e.server_id = s.server_id AND e.kind = 'mcp.server.unhealthy')
        FROM mcp_servers s
        WHERE s.status = 'unhealthy';
END
$function$;

REVOKE ALL ON FUNCTION mcp_unhealthy_servers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_unhealthy_servers() TO cyberos_app;
