-- The audit trail is the alert outbox. Each event records the transaction
-- that wrote it; a dispatcher reads, in (txid, seq) order, only events whose
-- transaction is older than every transaction still running, so an event
-- that commits late is never skipped: every event below that horizon is
-- final. One cursor per destination. mcpd claims a destination with a
-- session advisory lock (pg_try_advisory_lock on the destination's name),
-- not a transaction held open while delivering, which would hold back that
-- horizon for every other destination; a replica that dies mid-delivery
-- drops its connection and with it the claim.
ALTER TABLE mcp_audit_events ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX mcp_audit_events_alert_idx ON mcp_audit_events (txid, seq)
    WHERE kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered');

CREATE TABLE mcp_alert_cursors (
    destination TEXT PRIMARY KEY,
    last_txid   xid8 NOT NULL DEFAULT '0',
    last_seq    BIGINT NOT NULL DEFAULT 0,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- mcp_alert_claim returns up to p_limit alert events after p_destination's
-- cursor (created at the start of the trail when new). The caller holds the
-- destination's advisory lock.
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
    WHERE e.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
      AND (e.txid, e.seq) > (v_txid, v_seq)
      AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY e.txid, e.seq
    LIMIT p_limit;
END
$fn$;

-- mcp_alert_ack moves p_destination's cursor forward to (p_txid, p_seq),
-- never back.
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

-- mcp_alert_pending is, per destination, how many alert events wait and
-- when the oldest of them occurred (for the undelivered-age metric).
CREATE FUNCTION mcp_alert_pending(p_destination text)
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

-- mcp_unhealthy_servers lists every tenant's unhealthy servers, for the
-- periodic re-send of firing alerts.
CREATE FUNCTION mcp_unhealthy_servers()
RETURNS TABLE (server_id uuid, tenant_id uuid, module_name text, version text, last_heartbeat_at timestamptz,
               trace_id text, unhealthy_since timestamptz)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT s.server_id, s.tenant_id, s.module_name, s.version, s.last_heartbeat_at, s.trace_id::text,
           (SELECT max(e.occurred_at) FROM mcp_audit_events e
             WHERE e.server_id = s.server_id AND e.kind = 'mcp.server.unhealthy')
    FROM mcp_servers s
    WHERE s.status = 'unhealthy';
$fn$;

REVOKE ALL ON FUNCTION mcp_alert_claim(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_alert_ack(text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_alert_pending(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_unhealthy_servers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_claim(text, integer) TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_alert_ack(text, text, bigint) TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_alert_pending(text) TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_unhealthy_servers() TO cyberos_app;
