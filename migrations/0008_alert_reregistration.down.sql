DROP INDEX mcp_audit_events_alert_idx;
CREATE INDEX mcp_audit_events_alert_idx ON mcp_audit_events (txid, seq)
    WHERE kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered');

CREATE OR REPLACE FUNCTION mcp_alert_claim(p_destination text, p_limit integer)
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
    v_txid xid8 := '0';
    v_seq  bigint := 0;
BEGIN
    SELECT c.last_txid, c.last_seq INTO v_txid, v_seq FROM mcp_alert_cursors c WHERE c.destination = p_destination;
    IF NOT FOUND THEN
        INSERT INTO mcp_alert_cursors (destination) VALUES (p_destination) ON CONFLICT DO NOTHING;
        v_txid := '0';
        v_seq := 0;
    END IF;
    RETURN QUERY
    SELECT e.txid::text, e.seq, e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name,
           e.from_status, e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM mcp_audit_events e
    WHERE e.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
      AND (e.txid, e.seq) > (v_txid, v_seq)
      AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY e.txid, e.seq
    LIMIT p_limit;
END
$fn$;

CREATE OR REPLACE FUNCTION mcp_alert_pending(p_destination text)
RETURNS TABLE (pending bigint, oldest timestamptz)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT count(*), min(e.occurred_at)
    FROM mcp_audit_events e
    LEFT JOIN mcp_alert_cursors c ON c.destination = p_destination
    WHERE e.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
      AND (e.txid, e.seq) > (COALESCE(c.last_txid, '0'::xid8), COALESCE(c.last_seq, 0));
$fn$;
