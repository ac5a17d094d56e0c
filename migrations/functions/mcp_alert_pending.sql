-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_alert_pending(p_destination text)
 RETURNS TABLE(pending bigint, oldest timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY
    SELECT count(*), min(a.occurred_at)
    FROM mcp_tenant_feed f
    LEFT JOIN mcp_alert_positions p ON p.destination = p_destination AND p.tenant_id = f.tenant_id
    JOIN mcp_audit_events a ON a.tenant_id = f.tenant_id AND a.position > COALESCE(p.position, 0)
    WHERE f.alert_position > COALESCE(p.position, 0)
      AND (a.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
           OR (a.kind = 'mcp.server.registered' AND a.from_status = 'unhealthy'));
END
$function$;

REVOKE ALL ON FUNCTION mcp_alert_pending(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_pending(text) TO cyberos_app;
