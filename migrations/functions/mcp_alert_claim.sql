-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer)
 RETURNS TABLE(event_position bigint, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    -- The claim of every tenant: mcp_alert_claim_of's, whose filter a
    -- NULL list of tenants drops from each plan.
    RETURN QUERY SELECT * FROM mcp_alert_claim_of(p_destination, p_claimant, p_limit, NULL);
END
$function$;

REVOKE ALL ON FUNCTION mcp_alert_claim(text,uuid,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_claim(text,uuid,integer) TO cyberos_app;
