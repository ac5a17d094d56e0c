-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_skill_alerts_firing(p_destination text)
 RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY SELECT * FROM mcp_skill_alerts_firing_of(p_destination, NULL);
END
$function$;

REVOKE ALL ON FUNCTION mcp_skill_alerts_firing(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_skill_alerts_firing(text) TO cyberos_app;
