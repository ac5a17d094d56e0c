-- The change feed: positions in commit order, skill discovery, cursor key.
--
-- A position is (txid, seq) of an audit event. Transactions commit in any
-- order of their ids, so a reader hands out only events of transactions
-- older than the oldest one of this database still running: every later
-- event then has a larger txid and sorts after every position handed out.
-- The alert outbox (0005) reads the same way.

-- The global feed (every tenant, one read per poll per mcpd) ...
CREATE INDEX mcp_audit_events_feed_idx ON mcp_audit_events (txid, seq);
-- ... and a tenant's trail in the same order (audit list, catch-up).
CREATE INDEX mcp_audit_events_tenant_txid_idx ON mcp_audit_events (tenant_id, txid, seq);
DROP INDEX mcp_audit_events_tenant_seq_idx;

-- Skill discovery pages a tenant's skills by name.
CREATE INDEX mcp_skills_tenant_name_idx ON mcp_skills (tenant_id, name);

-- mcp_feed_horizon is the present position: the timeline (a failover starts
-- a new one, and positions of an older one are checked before use) and the
-- oldest transaction of this database still running (every event that
-- commits from now on has a txid at least this large). Transactions of
-- other databases of the cluster cannot write this trail and are left out
-- (pg_locks and pg_stat_activity tell their database), so that a long one
-- there does not hold the feed back; one whose database cannot be told
-- (a prepared transaction) counts, and so does one that ended between the
-- snapshot and the read of pg_locks: a horizon may therefore stand before
-- one an earlier call returned, never after a transaction of this database
-- still running; readers keep the later of the two. Without any: the
-- snapshot's xmax.
CREATE FUNCTION mcp_feed_horizon(OUT timeline bigint, OUT horizon xid8)
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

-- mcp_feed_read returns up to p_limit events of every tenant after
-- (p_txid, p_seq) below the horizon, in commit order, each row carrying the
-- horizon of the read; with no event, one row of the horizon alone (seq
-- NULL). One statement, one snapshot: the horizon and the events agree.
CREATE FUNCTION mcp_feed_read(p_txid xid8, p_seq bigint, p_limit integer)
RETURNS TABLE (
    timeline    bigint,
    horizon     xid8,
    txid        xid8,
    seq         bigint,
    event_id    uuid,
    tenant_id   uuid,
    kind        text,
    server_id   uuid,
    module_name text,
    from_status text,
    to_status   text,
    trace_id    text,
    occurred_at timestamptz,
    body        jsonb
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT h.timeline, h.horizon, e.txid, e.seq, e.event_id, e.tenant_id, e.kind, e.server_id,
           e.module_name, e.from_status, e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM mcp_feed_horizon() h
    LEFT JOIN LATERAL (
        SELECT * FROM mcp_audit_events a
        WHERE (a.txid, a.seq) > (p_txid, p_seq) AND a.txid < h.horizon
        ORDER BY a.txid, a.seq
        LIMIT p_limit
    ) e ON true
    ORDER BY e.txid, e.seq;
$fn$;

-- The secret that seals cursors (AES-256-GCM, associated data the tenant):
-- cursors reveal nothing of the trail's global positions, cannot be forged,
-- and one tenant's cursor is refused for another. One row, made here, the
-- same for every replica; cyberos_app reads it through mcp_cursor_key only.
CREATE TABLE mcp_cursor_keys (
    id  integer PRIMARY KEY CHECK (id = 1),
    key bytea NOT NULL CHECK (octet_length(key) = 32)
);
INSERT INTO mcp_cursor_keys (id, key)
VALUES (1, decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));
REVOKE ALL ON mcp_cursor_keys FROM PUBLIC;

CREATE FUNCTION mcp_cursor_key()
RETURNS bytea
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT key FROM mcp_cursor_keys WHERE id = 1;
$fn$;

REVOKE ALL ON FUNCTION mcp_feed_horizon() FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_feed_read(xid8, bigint, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_cursor_key() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_horizon() TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_feed_read(xid8, bigint, integer) TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_cursor_key() TO cyberos_app;
