-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_feed_horizon(p_tenant uuid, OUT epoch bigint, OUT pos bigint)
 RETURNS record
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    v_position bigint;
BEGIN
    SELECT f.position INTO v_position FROM mcp_tenant_feed f WHERE f.tenant_id = p_tenant;
    epoch := mcp_feed_epoch();
    pos := COALESCE(v_position, 0);
END
$function$;

REVOKE ALL ON FUNCTION mcp_feed_horizon(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_horizon(uuid) TO cyberos_app;
