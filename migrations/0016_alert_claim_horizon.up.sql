-- The alert outbox's claim waits only for the transactions of this
-- database, as the change feed does (0009, 0014): it read the cluster's
-- oldest running transaction (pg_snapshot_xmin), so a long transaction in
-- another database of the same cluster (a report, a migration, a backup's
-- export) held every alert back until it ended. mcp_feed_horizon() leaves
-- out the transactions that pg_locks and pg_stat_activity place in other
-- databases; same rule otherwise: an event is claimed only once nothing
-- that could commit before it is still running here.
-- mcp_alert_claim returns up to p_limit alert events after p_destination's
-- cursor, when p_claimant holds its lease; nothing otherwise.
CREATE OR REPLACE FUNCTION mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer)
RETURNS TABLE (
    txid        text,
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
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_txid xid8;
    v_seq  bigint;
BEGIN
    SELECT c.last_txid, c.last_seq INTO v_txid, v_seq
    FROM mcp_alert_cursors c
    WHERE c.destination = p_destination AND c.claimed_by = p_claimant;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT e.txid::text, e.seq, e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name,
           e.from_status, e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM mcp_audit_events e
    WHERE (e.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
           OR (e.kind = 'mcp.server.registered' AND e.from_status = 'unhealthy'))
      AND (e.txid, e.seq) > (v_txid, v_seq)
      AND e.txid < (SELECT h.horizon FROM mcp_feed_horizon() h)
    ORDER BY e.txid, e.seq
    LIMIT p_limit;
END
$fn$;
