-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_sweep_guard(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_blind_after interval)
 RETURNS TABLE(proceed boolean, degraded_after interval, unhealthy_after interval, blind_from timestamp with time zone, blind_until timestamp with time zone, blind_new boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_now   timestamptz := COALESCE(p_now, now());
    v_last  timestamptz;
    v_from  timestamptz;
    v_until timestamptz;
    v_new   boolean := false;
    v_deg   interval := p_degraded_after;
    v_unh   interval := p_unhealthy_after;
BEGIN
    SELECT st.last_sweep_at, st.blind_from, st.blind_until INTO v_last, v_from, v_until
    FROM mcp_monitor_state st WHERE st.id
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, NULL::interval, NULL::interval, NULL::timestamptz, NULL::timestamptz, false;
        RETURN;
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
        blind_windows = st.blind_windows + (v_new::integer)
    WHERE st.id;
    IF v_until IS NOT NULL AND v_until > v_now - p_degraded_after THEN
        v_deg := interval '1000 years';
    END IF;
    IF v_until IS NOT NULL AND v_until > v_now - p_unhealthy_after THEN
        v_unh := interval '1000 years';
    END IF;
    RETURN QUERY SELECT true, v_deg, v_unh, v_from, v_until, v_new;
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_guard(timestamp with time zone,interval,interval,interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_guard(timestamp with time zone,interval,interval,interval) TO cyberos_app;
