-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_sweep_guarded(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval)
 RETURNS TABLE(event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb, blind_from timestamp with time zone, blind_until timestamp with time zone, blind_new boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := COALESCE(p_now, now());
    v_last    timestamptz;
    v_from    timestamptz;
    v_until   timestamptz;
    v_new     boolean := false;
    v_never   constant interval := interval '1000 years';
    v_deg     interval := p_degraded_after;
    v_unh     interval := p_unhealthy_after;
BEGIN
    SELECT st.last_sweep_at, st.blind_from, st.blind_until INTO v_last, v_from, v_until
    FROM mcp_monitor_state st WHERE st.id
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN; -- another replica is sweeping now
    END IF;
    IF v_last IS NOT NULL AND p_blind_after IS NOT NULL AND p_blind_after > interval '0'
       AND v_now - v_last > p_blind_after THEN
        v_new := true;
        v_from := v_last;
        v_until := v_now;
    END IF;
    UPDATE mcp_monitor_state st
    SET last_sweep_at = GREATEST(v_now, COALESCE(st.last_sweep_at, v_now)),
        blind_from = v_from, blind_until = v_until,
        blind_windows = st.blind_windows + CASE WHEN v_new THEN 1 ELSE 0 END
    WHERE st.id;
    -- GREATEST(last_heartbeat_at, blind_until) <= now - lag holds only when
    -- blind_until does too: until then nothing of that kind is due.
    IF v_until IS NOT NULL AND v_until > v_now - p_degraded_after THEN
        v_deg := v_never;
    END IF;
    IF v_until IS NOT NULL AND v_until > v_now - p_unhealthy_after THEN
        v_unh := v_never;
    END IF;
    RETURN QUERY
    SELECT sw.event_id, sw.tenant_id, sw.kind, sw.server_id, sw.module_name, sw.from_status, sw.to_status,
           sw.trace_id, sw.occurred_at, sw.body, v_from, v_until, v_new
    FROM mcp_sweep(v_now, v_deg, v_unh, p_limit) sw;
    IF v_new AND NOT FOUND THEN
        RETURN QUERY SELECT NULL::uuid, NULL::uuid, NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text,
            NULL::text, NULL::timestamptz, NULL::jsonb, v_from, v_until, v_new;
    END IF;
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_guarded(timestamp with time zone,interval,interval,integer,interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_guarded(timestamp with time zone,interval,interval,integer,interval) TO cyberos_app;
