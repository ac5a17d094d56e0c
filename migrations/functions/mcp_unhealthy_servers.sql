-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_unhealthy_servers()
 RETURNS TABLE(server_id uuid, tenant_id uuid, module_name text, version text, last_heartbeat_at timestamp with time zone, trace_id text, unhealthy_since timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY SELECT * FROM mcp_unhealthy_servers_of(NULL);
END
$function$;

REVOKE ALL ON FUNCTION mcp_unhealthy_servers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_unhealthy_servers() TO cyberos_app;
