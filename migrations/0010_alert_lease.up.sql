-- A destination's cursor is claimed with a lease on its row instead of the
-- session advisory lock of migration 0005: behind a pooler in transaction
-- mode (pgbouncer) a session lock stays on a server connection that other
-- clients then use, and its unlock may run on another. The lease is taken,
-- and given back, in short transactions of their own, so no session state
-- and no open transaction is held while a replica delivers. A replica that
-- dies holding a lease keeps the destination until the lease runs out; one
-- that outlives its lease may deliver what another replica delivers too (at
-- least once), and its acknowledgement still moves the cursor only forward.
ALTER TABLE mcp_alert_cursors
    ADD COLUMN claimed_by    uuid,
    ADD COLUMN claimed_until timestamptz;

DROP FUNCTION mcp_alert_claim(text, integer);
DROP FUNCTION mcp_alert_ack(text, text, bigint);

-- mcp_alert_lease gives p_destination's lease to p_claimant for p_lease
-- when no one else holds it (creating the cursor at the start of the trail
-- when new), and reports whether p_claimant holds it.
CREATE FUNCTION mcp_alert_lease(p_destination text, p_claimant uuid, p_lease interval)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
BEGIN
    INSERT INTO mcp_alert_cursors (destination) VALUES (p_destination) ON CONFLICT DO NOTHING;
    UPDATE mcp_alert_cursors
    SET claimed_by = p_claimant, claimed_until = clock_timestamp() + p_lease
    WHERE destination = p_destination
      AND (claimed_by IS NULL OR claimed_by = p_claimant OR claimed_until <= clock_timestamp());
    RETURN FOUND;
END
$fn$;

-- mcp_alert_claim returns up to p_limit alert events after p_destination's
-- cursor, when p_claimant holds its lease; nothing otherwise.
CREATE FUNCTION mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer)
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
      AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY e.txid, e.seq
    LIMIT p_limit;
END
$fn$;

-- mcp_alert_ack moves p_destination's cursor forward to (p_txid, p_seq),
-- never back, and gives up p_claimant's lease (a NULL p_txid only gives it
-- up). The cursor moves even when the lease ran out meanwhile: what was
-- delivered was delivered.
CREATE FUNCTION mcp_alert_ack(p_destination text, p_claimant uuid, p_txid text, p_seq bigint)
RETURNS void
LANGUAGE sql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    UPDATE mcp_alert_cursors c
    SET last_txid     = CASE WHEN (c.last_txid, c.last_seq) < (p_txid::xid8, p_seq) THEN p_txid::xid8 ELSE c.last_txid END,
        last_seq      = CASE WHEN (c.last_txid, c.last_seq) < (p_txid::xid8, p_seq) THEN p_seq ELSE c.last_seq END,
        updated_at    = CASE WHEN (c.last_txid, c.last_seq) < (p_txid::xid8, p_seq) THEN now() ELSE c.updated_at END,
        claimed_by    = CASE WHEN c.claimed_by = p_claimant THEN NULL ELSE c.claimed_by END,
        claimed_until = CASE WHEN c.claimed_by = p_claimant THEN NULL ELSE c.claimed_until END
    WHERE c.destination = p_destination
      AND ((c.last_txid, c.last_seq) < (p_txid::xid8, p_seq) OR c.claimed_by = p_claimant);
$fn$;

REVOKE ALL ON FUNCTION mcp_alert_lease(text, uuid, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_alert_claim(text, uuid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION mcp_alert_ack(text, uuid, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_lease(text, uuid, interval) TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_alert_claim(text, uuid, integer) TO cyberos_app;
GRANT EXECUTE ON FUNCTION mcp_alert_ack(text, uuid, text, bigint) TO cyberos_app;
