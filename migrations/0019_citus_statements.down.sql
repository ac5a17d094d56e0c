DROP FUNCTION mcp_heartbeat_healthy_tenant(uuid, uuid[], timestamptz);
CREATE OR REPLACE FUNCTION mcp_alert_lease(p_destination text, p_claimant uuid, p_lease interval) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO mcp_alert_cursors (destination) VALUES (p_destination) ON CONFLICT DO NOTHING;
    UPDATE mcp_alert_cursors
    SET claimed_by = p_claimant, claimed_until = clock_timestamp() + p_lease
    WHERE destination = p_destination
      AND (claimed_by IS NULL OR claimed_by = p_claimant OR claimed_until <= clock_timestamp());
    RETURN FOUND;
END
$$;

CREATE OR REPLACE FUNCTION mcp_alert_ack(p_destination text, p_claimant uuid, p_tenants uuid[], p_positions bigint[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
BEGIN
    INSERT INTO mcp_alert_positions AS p (destination, tenant_id, position)
    SELECT p_destination, r.tenant_id, r.position
    FROM unnest(p_tenants, p_positions) AS r(tenant_id, position)
    ORDER BY r.tenant_id
    ON CONFLICT (destination, tenant_id) DO UPDATE
    SET position = GREATEST(p.position, EXCLUDED.position);
    UPDATE mcp_alert_cursors c
    SET claimed_by = NULL, claimed_until = NULL, updated_at = clock_timestamp()
    WHERE c.destination = p_destination AND c.claimed_by = p_claimant;
END
$fn$;

DROP FUNCTION mcp_feed_read_each(uuid[], bigint[], integer);
CREATE OR REPLACE FUNCTION mcp_live_counts(p_tenants uuid[]) RETURNS TABLE(tenant_id uuid, live bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    SELECT s.tenant_id, count(*) FROM mcp_servers s
    WHERE s.tenant_id = ANY (p_tenants) AND s.status <> 'deregistered'
    GROUP BY s.tenant_id;
$$;
CREATE OR REPLACE FUNCTION mcp_skill_alert_states(p_destination text, p_tenants uuid[], p_skills text[]) RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    SELECT k.tenant_id, k.skill,
           EXISTS (SELECT 1 FROM mcp_skills s WHERE s.tenant_id = k.tenant_id AND s.name = k.skill AND s.available),
           a.since
    FROM unnest(p_tenants, p_skills) WITH ORDINALITY AS k(tenant_id, skill, ord)
    LEFT JOIN mcp_skill_alerts a
           ON a.destination = p_destination AND a.tenant_id = k.tenant_id AND a.skill = k.skill
    ORDER BY k.ord;
$$;
CREATE OR REPLACE FUNCTION mcp_skill_alerts_firing(p_destination text) RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    SELECT a.tenant_id, a.skill,
           EXISTS (SELECT 1 FROM mcp_skills s WHERE s.tenant_id = a.tenant_id AND s.name = a.skill AND s.available),
           a.since
    FROM mcp_skill_alerts a
    WHERE a.destination = p_destination
    ORDER BY a.tenant_id, a.skill;
$$;
CREATE OR REPLACE FUNCTION mcp_skill_alerts_record(p_destination text, p_tenants uuid[], p_skills text[], p_since timestamp with time zone[], p_resolved_tenants uuid[], p_resolved_skills text[]) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    INSERT INTO mcp_skill_alerts (destination, tenant_id, skill, since)
    SELECT p_destination, r.tenant_id, r.skill, r.since
    FROM unnest(p_tenants, p_skills, p_since) AS r(tenant_id, skill, since)
    ON CONFLICT (destination, tenant_id, skill) DO NOTHING;
    DELETE FROM mcp_skill_alerts a
    USING unnest(p_resolved_tenants, p_resolved_skills) AS r(tenant_id, skill)
    WHERE a.destination = p_destination AND a.tenant_id = r.tenant_id AND a.skill = r.skill;
$$;
CREATE OR REPLACE FUNCTION mcp_unhealthy_servers() RETURNS TABLE(server_id uuid, tenant_id uuid, module_name text, version text, last_heartbeat_at timestamp with time zone, trace_id text, unhealthy_since timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    SELECT s.server_id, s.tenant_id, s.module_name, s.version, s.last_heartbeat_at, s.trace_id::text,
           (SELECT max(e.occurred_at) FROM mcp_audit_events e
             WHERE e.server_id = s.server_id AND e.kind = 'mcp.server.unhealthy')
    FROM mcp_servers s
    WHERE s.status = 'unhealthy';
$$;
DROP FUNCTION mcp_sweep_tenant(uuid, timestamptz, interval, interval, integer, interval);
ALTER TABLE mcp_tenant_servers DROP COLUMN last_sweep_at, DROP COLUMN blind_until;
DROP FUNCTION mcp_sweep_tenants();
DROP FUNCTION mcp_sweep_guard(timestamptz, interval, interval, interval);
DROP FUNCTION mcp_heartbeat_tenant(uuid, uuid[], timestamptz);
REVOKE INSERT, UPDATE (position, alert_position) ON mcp_tenant_feed FROM cyberos_app;
ALTER FUNCTION mcp_feed_next(uuid, text, text) SECURITY DEFINER;
DROP FUNCTION mcp_now(timestamptz);
DROP FUNCTION mcp_set_tenant(uuid);
