-- The skill outage alert (MCPSkillUnavailable) fires, per destination, for
-- a skill name of a tenant none of whose skills is available. The outbox's
-- events say when to look; this table is what each destination was told:
-- one row per firing alert, written after the destination accepted it, so
-- that a restart neither raises an outage twice nor forgets to resolve it.
-- The app role reaches it only through the functions below, across
-- tenants, under the destination's claim, as it reaches the cursors.
CREATE TABLE mcp_skill_alerts (
    destination TEXT NOT NULL,
    tenant_id   UUID NOT NULL,
    skill       TEXT NOT NULL,
    since       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (destination, tenant_id, skill)
);
ALTER TABLE mcp_skill_alerts ENABLE ROW LEVEL SECURITY;

-- mcp_skill_alert_states reports, for each (tenant, skill name) pair given,
-- whether a skill of that name is available in the tenant now, and since
-- when p_destination's alert about it fires (NULL: not firing), in the
-- order given.
CREATE FUNCTION mcp_skill_alert_states(p_destination text, p_tenants uuid[], p_skills text[])
RETURNS TABLE (tenant_id uuid, skill text, available boolean, firing_since timestamptz)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT k.tenant_id, k.skill,
           EXISTS (SELECT 1 FROM mcp_skills s WHERE s.tenant_id = k.tenant_id AND s.name = k.skill AND s.available),
           a.since
    FROM unnest(p_tenants, p_skills) WITH ORDINALITY AS k(tenant_id, skill, ord)
    LEFT JOIN mcp_skill_alerts a
           ON a.destination = p_destination AND a.tenant_id = k.tenant_id AND a.skill = k.skill
    ORDER BY k.ord;
$fn$;

-- mcp_skill_alerts_firing lists p_destination's firing skill alerts, each
-- with whether a skill of its name is available again.
CREATE FUNCTION mcp_skill_alerts_firing(p_destination text)
RETURNS TABLE (tenant_id uuid, skill text, available boolean, firing_since timestamptz)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT a.tenant_id, a.skill,
           EXISTS (SELECT 1 FROM mcp_skills s WHERE s.tenant_id = a.tenant_id AND s.name = a.skill AND s.available),
           a.since
    FROM mcp_skill_alerts a
    WHERE a.destination = p_destination
    ORDER BY a.tenant_id, a.skill;
$fn$;

-- mcp_skill_alerts_record records that p_destination accepted the raise of
-- the alerts p_tenants/p_skills (firing since p_since) and the resolution
-- of p_resolved_tenants/p_resolved_skills. A raise already recorded keeps
-- its first time.
CREATE FUNCTION mcp_skill_alerts_record(p_destination text, p_tenants uuid[], p_skills text[], p_since timestamptz[],
                                        p_resolved_tenants uuid[], p_resolved_skills text[])
RETURNS void
LANGUAGE sql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    INSERT INTO mcp_skill_alerts (destination, tenant_id, skill, since)
    SELECT p_destination, r.tenant_id, r.skill, r.since
    FROM unnest(p_tenants, p_skills, p_since) AS r(tenant_id, skill, since)
    ON CONFLICT (destination, tenant_id, skill) DO NOTHING;
    DELETE FROM mcp_skill_alerts a
    USING unnest(p_resolved_tenants, p_resolved_skills) AS r(tenant_id, skill)
    WHERE a.destination = p_destination AND a.tenant_id = r.tenant_id AND a.skill = r.skill;
$fn$;

REVOKE ALL ON FUNCTION mcp_skill_alert_states(text, uuid[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_skill_alerts_firing(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_skill_alerts_record(text, uuid[], text[], timestamptz[], uuid[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_skill_alert_states(text, uuid[], text[]) TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_skill_alerts_firing(text) TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_skill_alerts_record(text, uuid[], text[], timestamptz[], uuid[], text[]) TO cyberos_app;
