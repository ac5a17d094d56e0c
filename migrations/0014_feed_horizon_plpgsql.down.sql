-- Back to the SQL function of 0009.
CREATE OR REPLACE FUNCTION mcp_feed_horizon(OUT timeline bigint, OUT horizon xid8)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    WITH s AS (SELECT pg_current_snapshot() AS snap)
    SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint,
           COALESCE(
               (SELECT min(x) FROM s, pg_snapshot_xip(s.snap) AS x
                WHERE NOT EXISTS (
                    SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.locktype = 'transactionid' AND l.transactionid = x::xid
                      AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database()))),
               (SELECT pg_snapshot_xmax(s.snap) FROM s));
$fn$;
