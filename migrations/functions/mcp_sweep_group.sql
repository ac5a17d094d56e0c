-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- On Citus, sweeps the tenants p_tenants, in their order, as
-- mcp_sweep_tenant does each, in one transaction: at most p_limit
-- transitions in all, each tenant given what the tenants before it left.
-- The tenants' shards are on p_tenant's worker, to which the call is handed
-- whole (function call delegation), so that a worker with many tenants due
-- gets one call a sweep, not one for each.
--
-- The call never waits for a lock that another transaction holds: it takes
-- each tenant's rows of mcp_tenant_servers and mcp_tenant_feed with NOWAIT,
-- its servers' rows with SKIP LOCKED (mcp_sweep_tenant), and any other
-- lock for at most lock_timeout, each tenant in a subtransaction of its
-- own. A transaction that holds one tenant's rows and waits for another's
-- (a heartbeat group, a registration group of the same worker) so never
-- meets it in a deadlock; the tenant is left, and swept alone.
--
-- Returns the transitions made, and for each tenant left to sweep alone one
-- row whose event_id is NULL: a tenant whose rows were held, one the limit
-- did not reach, and one whose sweep used up what was left of it (it may
-- have more due).
CREATE OR REPLACE FUNCTION mcp_sweep_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval)
 RETURNS TABLE(event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
 SET lock_timeout TO '50ms'
AS $function$
#variable_conflict use_column
DECLARE
    v_left   integer := p_limit;
    v_tenant uuid;
    v_before bigint;
    v_n      integer;
BEGIN
    FOREACH v_tenant IN ARRAY p_tenants LOOP
        v_n := NULL;
        IF v_left > 0 THEN
            BEGIN
                PERFORM 1 FROM mcp_tenant_servers t WHERE t.tenant_id = v_tenant FOR UPDATE NOWAIT;
                SELECT f.position INTO v_before FROM mcp_tenant_feed f WHERE f.tenant_id = v_tenant FOR UPDATE NOWAIT;
                SELECT count(*) INTO v_n
                FROM mcp_sweep_tenant(v_tenant, p_now, p_degraded_after, p_unhealthy_after, v_left, p_blind_after);
            EXCEPTION WHEN lock_not_available THEN
                v_n := NULL;
            END;
        END IF;
        IF v_n > 0 THEN
            -- Read once the tenant's subtransaction committed: rows
            -- returned from inside it would stay if it rolled back.
            RETURN QUERY
            SELECT e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
                   e.to_status, e.trace_id::text, e.occurred_at, e.body
            FROM mcp_audit_events e
            WHERE e.tenant_id = v_tenant AND e.position > v_before AND e.position <= v_before + v_n
            ORDER BY e.position;
            v_left := v_left - v_n;
        END IF;
        IF v_n IS NULL OR v_left <= 0 THEN
            RETURN QUERY SELECT NULL::uuid, v_tenant, NULL::text, NULL::uuid, NULL::text, NULL::text,
                                NULL::text, NULL::text, NULL::timestamptz, NULL::jsonb;
        END IF;
    END LOOP;
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_group(uuid,uuid[],timestamp with time zone,interval,interval,integer,interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_group(uuid,uuid[],timestamp with time zone,interval,interval,integer,interval) TO cyberos_app;
