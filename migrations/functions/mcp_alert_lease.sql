-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_alert_lease(p_destination text, p_claimant uuid, p_lease interval)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    INSERT INTO mcp_alert_cursors (destination) VALUES (p_destination) ON CONFLICT DO NOTHING;
    UPDATE mcp_alert_cursors
    SET claimed_by = p_claimant, claimed_until = v_now + p_lease
    WHERE destination = p_destination
      AND (claimed_by IS NULL OR claimed_by = p_claimant OR claimed_until <= v_now);
    RETURN FOUND;
END
$function$;

REVOKE ALL ON FUNCTION mcp_alert_lease(text,uuid,interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_lease(text,uuid,interval) TO cyberos_app;
