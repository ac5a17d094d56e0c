-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_status_counts()
 RETURNS TABLE(status text, servers bigint)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT s.status, count(*) FROM mcp_servers s GROUP BY s.status;
$function$;

REVOKE ALL ON FUNCTION mcp_status_counts() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_status_counts() TO cyberos_app;
