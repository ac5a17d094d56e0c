DROP FUNCTION IF EXISTS mcp_alert_ack(text, uuid, text, bigint);
DROP FUNCTION IF EXISTS mcp_alert_claim(text, uuid, integer);
DROP FUNCTION IF EXISTS mcp_alert_lease(text, uuid, interval);
ALTER TABLE mcp_alert_cursors DROP COLUMN IF EXISTS claimed_until, DROP COLUMN IF EXISTS claimed_by;

-- Migration 0008's claim and 0005's acknowledgement, under the session
-- advisory lock that mcpd took before this migration.
CREATE FUNCTION mcp_alert_claim(p_destination text, p_limit integer)
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
    WHERE (e.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
           OR (e.kind = 'mcp.server.registered' AND e.from_status = 'unhealthy'))
      AND (e.txid, e.seq) > (v_txid, v_seq)
      AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY e.txid, e.seq
    LIMIT p_limit;
END
$fn$;

CREATE FUNCTION mcp_alert_ack(p_destination text, p_txid text, p_seq bigint)
RETURNS void
LANGUAGE sql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    UPDATE mcp_alert_cursors
    SET last_txid = p_txid::xid8, last_seq = p_seq, updated_at = now()
    WHERE destination = p_destination AND (last_txid, last_seq) < (p_txid::xid8, p_seq);
$fn$;

REVOKE ALL ON FUNCTION mcp_alert_claim(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_alert_ack(text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_claim(text, integer) TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_alert_ack(text, text, bigint) TO cyberos_app;
