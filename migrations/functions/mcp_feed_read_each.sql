-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_feed_read_each(p_tenants uuid[], p_after bigint[], p_limit integer)
 RETURNS TABLE(epoch bigint, feed_tenant uuid, horizon bigint, event_position bigint, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_epoch bigint := mcp_feed_epoch();
    v_horizons jsonb;
    v_horizon bigint;
BEGIN
    -- Every tenant's horizon in one statement: on Citus a task on each
    -- shard that holds one of them, not a statement per tenant.
    SELECT COALESCE(jsonb_object_agg(f.tenant_id::text, f.position), '{}'::jsonb) INTO v_horizons
    FROM mcp_tenant_feed f WHERE f.tenant_id = ANY(p_tenants);
    FOR i IN 1 .. COALESCE(cardinality(p_tenants), 0) LOOP
        v_horizon := COALESCE((v_horizons ->> p_tenants[i]::text)::bigint, 0);
        IF p_after[i] >= v_horizon THEN
            -- Nothing new (a read of the horizon alone, or a tenant at
            -- rest): its row without a statement.
            epoch := v_epoch;
            feed_tenant := p_tenants[i];
            horizon := v_horizon;
            event_position := NULL; seq := NULL; event_id := NULL; tenant_id := NULL; kind := NULL;
            server_id := NULL; module_name := NULL; from_status := NULL; to_status := NULL;
            trace_id := NULL; occurred_at := NULL; body := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- Every event up to the horizon read above has committed: a later
        -- snapshot sees them all.
        RETURN QUERY
        SELECT v_epoch, p_tenants[i], v_horizon, e.position, e.seq, e.event_id, e.tenant_id, e.kind,
               e.server_id, e.module_name, e.from_status, e.to_status, e.trace_id::text, e.occurred_at, e.body
        FROM (SELECT 1) one
        LEFT JOIN (
            SELECT a.* FROM mcp_audit_events a
            WHERE a.tenant_id = p_tenants[i] AND a.position > p_after[i] AND a.position <= v_horizon
            ORDER BY a.position
            LIMIT p_limit
        ) e ON true
        ORDER BY e.position;
    END LOOP;
END
$function$;

REVOKE ALL ON FUNCTION mcp_feed_read_each(uuid[],bigint[],integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_read_each(uuid[],bigint[],integer) TO cyberos_app;
