-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- On Citus, the length of the last sweep that began (mcp_sweep_guard) and
-- recorded its end (mcp_sweep_ended); zero when it recorded none (its
-- replica died, or its database did not answer). The next sweep adds it
-- to the blind window's threshold, so that the gap it counts runs from the
-- last sweep's end, not its start.
CREATE OR REPLACE FUNCTION mcp_sweep_slack()
 RETURNS interval
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
    SELECT COALESCE(max(st.last_sweep_end - st.last_sweep_at) FILTER (WHERE st.last_sweep_end >= st.last_sweep_at),
                    interval '0')
    FROM mcp_monitor_state st WHERE st.id
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_slack() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_slack() TO cyberos_app;
