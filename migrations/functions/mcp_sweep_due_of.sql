-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- On Citus, mcp_sweep_due for the tenants p_tenants alone: the tenants of
-- p_tenants with a server that a sweep at p_now (NULL: now()) would move.
-- The sweep reads it while a worker is down, when a read of every shard
-- fails, for the tenants of the workers that answer: the filter on the
-- distribution column (a constant in each custom plan) leaves Citus the
-- shards of those tenants alone, so the read reaches no worker that is
-- down, and the tenants with nothing due are marked swept
-- (mcp_sweep_mark_group) rather than each swept in a call of its own.
CREATE OR REPLACE FUNCTION mcp_sweep_due_of(p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval)
 RETURNS TABLE(tenant_id uuid)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_now              timestamptz := COALESCE(p_now, now());
    v_degraded_before  timestamptz := v_now - p_degraded_after;
    v_unhealthy_before timestamptz := v_now - p_unhealthy_after;
BEGIN
    RETURN QUERY
    SELECT DISTINCT s.tenant_id
    FROM mcp_servers s
    WHERE s.tenant_id = ANY (p_tenants)
      AND s.status IN ('healthy', 'degraded')
      AND ((s.status = 'healthy' AND s.last_heartbeat_at <= v_degraded_before)
           OR (s.status = 'degraded' AND s.last_heartbeat_at <= v_unhealthy_before));
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_due_of(uuid[],timestamp with time zone,interval,interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_due_of(uuid[],timestamp with time zone,interval,interval) TO cyberos_app;
