-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- On Citus, records that the sweep whose guard ran last (mcp_sweep_guard)
-- took p_took: the sweep calls it as it ends, still holding the lock that
-- keeps other replicas from sweeping, so the last guard's run is its own.
-- mcp_sweep_slack then gives the next sweep that length.
CREATE OR REPLACE FUNCTION mcp_sweep_ended(p_took interval)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    UPDATE mcp_monitor_state st
    SET last_sweep_end = st.last_sweep_at + p_took
    WHERE st.id AND st.last_sweep_at IS NOT NULL AND p_took >= interval '0';
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_ended(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_ended(interval) TO cyberos_app;
