-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- On Citus, the tenants with a server that a sweep at p_now (NULL: now())
-- would move: healthy and silent for p_degraded_after, or degraded and
-- silent for p_unhealthy_after. One read of every shard, a task each, no
-- lock (mcp_servers_sweep_idx): the sweep then calls mcp_sweep_tenant for
-- these tenants alone, which moves what is due under its locks and each
-- tenant's own blind window, and marks the others swept
-- (mcp_sweep_mark_group).
--
-- On Citus, migrate up sets citus.max_adaptive_executor_pool_size 1 on
-- it, mcp_sweep_tenants and mcp_sweep_due_of (pkg/schema/citus.go):
-- one connection per worker for the sweep's reads of every shard.
CREATE OR REPLACE FUNCTION mcp_sweep_due(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval)
 RETURNS TABLE(tenant_id uuid)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
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
    WHERE s.status IN ('healthy', 'degraded')
      AND ((s.status = 'healthy' AND s.last_heartbeat_at <= v_degraded_before)
           OR (s.status = 'degraded' AND s.last_heartbeat_at <= v_unhealthy_before));
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_due(timestamp with time zone,interval,interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_due(timestamp with time zone,interval,interval) TO cyberos_app;
