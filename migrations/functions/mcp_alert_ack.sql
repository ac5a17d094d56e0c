-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_alert_ack(p_destination text, p_claimant uuid, p_tenants uuid[], p_positions bigint[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    INSERT INTO mcp_alert_positions AS p (destination, tenant_id, position)
    SELECT p_destination, r.tenant_id, r.position
    FROM unnest(p_tenants, p_positions) AS r(tenant_id, position)
    ORDER BY r.tenant_id
    ON CONFLICT (destination, tenant_id) DO UPDATE
    SET position = GREATEST(p.position, EXCLUDED.position);
    UPDATE mcp_alert_cursors c
    SET claimed_by = NULL, claimed_until = NULL, updated_at = v_now
    WHERE c.destination = p_destination AND c.claimed_by = p_claimant;
END
$function$;

REVOKE ALL ON FUNCTION mcp_alert_ack(text,uuid,uuid[],bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_ack(text,uuid,uuid[],bigint[]) TO cyberos_app;
