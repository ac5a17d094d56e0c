-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_cursor_key()
 RETURNS bytea
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT key FROM mcp_cursor_keys WHERE id = 1;
$function$;

REVOKE ALL ON FUNCTION mcp_cursor_key() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_cursor_key() TO cyberos_app;
