-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- Destination's firing skill alerts of the tenants p_tenants (NULL: every
-- tenant, which mcp_skill_alerts_firing is): read per Citus worker while
-- a worker is down (see mcp_alert_claim_of). Each table is
-- filtered by p_tenants: Citus prunes the shards of each by its own.
CREATE OR REPLACE FUNCTION mcp_skill_alerts_firing_of(p_destination text, p_tenants uuid[])
 RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT a.tenant_id, a.skill,
               EXISTS (SELECT 1 FROM mcp_skills s WHERE s.tenant_id = a.tenant_id AND (p_tenants IS NULL OR s.tenant_id = ANY (p_tenants)) AND s.name = a.skill AND s.available),
               a.since
        FROM mcp_skill_alerts a
        WHERE (p_tenants IS NULL OR a.tenant_id = ANY (p_tenants)) AND a.destination = p_destination
        ORDER BY a.tenant_id, a.skill;
END
$function$;

REVOKE ALL ON FUNCTION mcp_skill_alerts_firing_of(text,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_skill_alerts_firing_of(text,uuid[]) TO cyberos_app;
