-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- p_tenant's present position (0 before its first event), without the
-- epoch: mcp_feed_horizon less mcp_feed_epoch. mcpd reads it on a Citus
-- worker, whose own epoch a position must not carry (the coordinator's is
-- read apart); on plain PostgreSQL and through the coordinator it reads
-- mcp_feed_horizon.
CREATE OR REPLACE FUNCTION mcp_feed_position(p_tenant uuid)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    v_position bigint;
BEGIN
    SELECT f.position INTO v_position FROM mcp_tenant_feed f WHERE f.tenant_id = p_tenant;
    RETURN COALESCE(v_position, 0);
END
$function$;

REVOKE ALL ON FUNCTION mcp_feed_position(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_position(uuid) TO cyberos_app;
