-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_feed_next(p_tenant uuid, p_kind text, p_from text)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    v_alert boolean := p_kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
                       OR (p_kind = 'mcp.server.registered' AND p_from IS NOT DISTINCT FROM 'unhealthy');
    v_position bigint;
BEGIN
    INSERT INTO mcp_tenant_feed AS f (tenant_id, position, alert_position)
    VALUES (p_tenant, 1, CASE WHEN v_alert THEN 1 ELSE 0 END)
    ON CONFLICT (tenant_id) DO UPDATE
    SET position = f.position + 1,
        alert_position = CASE WHEN v_alert THEN f.position + 1 ELSE f.alert_position END
    RETURNING f.position INTO v_position;
    RETURN v_position;
END
$function$;

REVOKE ALL ON FUNCTION mcp_feed_next(uuid,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_next(uuid,text,text) TO cyberos_app;
