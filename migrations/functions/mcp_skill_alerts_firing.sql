-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_skill_alerts_firing(p_destination text)
 RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT a.tenant_id, a.skill,
               EXISTS (SELECT 1 FROM mcp_skills s WHERE s.tenant_id = a.tenant_id AND s.name = a.skill AND s.available),
               a.since
        FROM mcp_skill_alerts a
        WHERE a.destination = p_destination
        ORDER BY a.tenant_id, a.skill;
END
$function$;

REVOKE ALL ON FUNCTION mcp_skill_alerts_firing(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_skill_alerts_firing(text) TO cyberos_app;
