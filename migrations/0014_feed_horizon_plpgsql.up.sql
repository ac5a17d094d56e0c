-- mcp_feed_horizon (0009) in PL/pgSQL: a SECURITY DEFINER SQL function is
-- never inlined, and PostgreSQL plans such a function's query on every
-- call; its NOT EXISTS over the pg_locks and pg_stat_activity views cost
-- about 0.8 ms of planning on every list page (each carries watch_cursor)
-- and every feed read. PL/pgSQL keeps its plans for the session. Same
-- result, same snapshot (a STABLE function runs in its caller's), same
-- rules: see 0009.
CREATE OR REPLACE FUNCTION mcp_feed_horizon(OUT timeline bigint, OUT horizon xid8)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
DECLARE
    snap pg_snapshot := pg_current_snapshot();
BEGIN
    timeline := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
    SELECT min(x) INTO horizon
    FROM pg_snapshot_xip(snap) AS x
    WHERE NOT EXISTS (
        SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'transactionid' AND l.transactionid = x::xid
          AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database()));
    horizon := COALESCE(horizon, pg_snapshot_xmax(snap));
END;
$fn$;
