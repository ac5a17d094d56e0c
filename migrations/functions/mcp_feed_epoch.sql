-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_feed_epoch()
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    RETURN ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
END
$function$;

REVOKE ALL ON FUNCTION mcp_feed_epoch() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_epoch() TO cyberos_app;
