-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer)
 RETURNS TABLE(event_position bigint, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    PERFORM 1 FROM mcp_alert_cursors c
    WHERE c.destination = p_destination AND c.claimed_by = p_claimant;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT e.position, e.seq, e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name,
           e.from_status, e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM mcp_tenant_feed f
    LEFT JOIN mcp_alert_positions p ON p.destination = p_destination AND p.tenant_id = f.tenant_id
    CROSS JOIN LATERAL (
        SELECT a.* FROM mcp_audit_events a
        WHERE a.tenant_id = f.tenant_id
          AND (a.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
               OR (a.kind = 'mcp.server.registered' AND a.from_status = 'unhealthy'))
          AND a.position > COALESCE(p.position, 0)
        ORDER BY a.position
        LIMIT p_limit
    ) e
    WHERE f.alert_position > COALESCE(p.position, 0)
    ORDER BY e.occurred_at, e.tenant_id, e.position
    LIMIT p_limit;
END
$function$;

REVOKE ALL ON FUNCTION mcp_alert_claim(text,uuid,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_claim(text,uuid,integer) TO cyberos_app;
