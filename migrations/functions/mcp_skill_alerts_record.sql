-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_skill_alerts_record(p_destination text, p_tenants uuid[], p_skills text[], p_since timestamp with time zone[], p_resolved_tenants uuid[], p_resolved_skills text[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
BEGIN
    INSERT INTO mcp_skill_alerts (destination, tenant_id, skill, since)
        SELECT p_destination, r.tenant_id, r.skill, r.since
        FROM unnest(p_tenants, p_skills, p_since) AS r(tenant_id, skill, since)
        ON CONFLICT (destination, tenant_id, skill) DO NOTHING;
    -- The resolved tenants' shards alone (the filter on the distribution
    -- column, a constant in each custom plan): on Citus, without it the
    -- DELETE ran on every shard, and failed while any worker was down.
    IF COALESCE(cardinality(p_resolved_tenants), 0) > 0 THEN
        DELETE FROM mcp_skill_alerts a
        USING unnest(p_resolved_tenants, p_resolved_skills) AS r(tenant_id, skill)
        WHERE a.destination = p_destination AND a.tenant_id = ANY (p_resolved_tenants)
          AND a.tenant_id = r.tenant_id AND a.skill = r.skill;
    END IF;
END
$function$;

REVOKE ALL ON FUNCTION mcp_skill_alerts_record(text,uuid[],text[],timestamp with time zone[],uuid[],text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_skill_alerts_record(text,uuid[],text[],timestamp with time zone[],uuid[],text[]) TO cyberos_app;
