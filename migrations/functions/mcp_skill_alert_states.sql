-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_skill_alert_states(p_destination text, p_tenants uuid[], p_skills text[])
 RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    FOR i IN 1 .. COALESCE(cardinality(p_tenants), 0) LOOP
        RETURN QUERY
        SELECT p_tenants[i], p_skills[i],
               EXISTS (SELECT 1 FROM mcp_skills s
                       WHERE s.tenant_id = p_tenants[i] AND s.name = p_skills[i] AND s.available),
               (SELECT a.since FROM mcp_skill_alerts a
                WHERE a.destination = p_destination AND a.tenant_id = p_tenants[i] AND a.skill = p_skills[i]);
    END LOOP;
END
$function$;

REVOKE ALL ON FUNCTION mcp_skill_alert_states(text,uuid[],text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_skill_alert_states(text,uuid[],text[]) TO cyberos_app;
