-- Back to the transaction-id positions of 0009-0016. Every event gets the
-- txid of this migration's transaction: their order (txid, seq) is then
-- their sequence, and every cursor of the per-tenant positions is expired.
CREATE OR REPLACE FUNCTION mcp_heartbeat(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) RETURNS TABLE(o_tenant_id uuid, o_server_id uuid, o_prev_status text, s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := COALESCE(p_now, now());
BEGIN
-- Lock first, in server_id order (so that concurrent batches cannot
-- deadlock), in a statement of its own: the next statement then takes its
-- snapshot after any sweep that held these rows has committed, and sees the
-- skills that sweep took away.
PERFORM 1
FROM mcp_servers s
JOIN unnest(p_tenants, p_servers) AS r(tenant_id, server_id)
  ON s.server_id = r.server_id AND s.tenant_id = r.tenant_id
ORDER BY s.server_id
FOR UPDATE OF s;

RETURN QUERY
WITH prev AS (
    SELECT DISTINCT s.server_id, s.tenant_id, s.status
    FROM mcp_servers s
    JOIN unnest(p_tenants, p_servers) AS r(tenant_id, server_id)
      ON s.server_id = r.server_id AND s.tenant_id = r.tenant_id
), upd AS (
    UPDATE mcp_servers s
    SET last_heartbeat_at = v_now, status = 'healthy'
    FROM prev p
    WHERE s.server_id = p.server_id AND p.status <> 'deregistered'
    RETURNING s.server_id, s.tenant_id, s.module_name, s.version, s.supported_protocols,
              s.capability_advertisement, s.status, s.last_heartbeat_at, s.registered_at,
              s.deregistered_at, s.trace_id, s.remotes, s.description, s.title, p.status AS from_status
), restored AS (
    UPDATE mcp_skills k
    SET available = true, unavailable_reason = NULL
    FROM upd u
    WHERE k.server_id = u.server_id AND u.from_status = 'unhealthy'
      AND k.unavailable_reason = 'server_unhealthy'
    RETURNING k.server_id, k.name
), ev AS (
    INSERT INTO mcp_audit_events
        (event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
         trace_id, occurred_at, body)
    SELECT gen_random_uuid(), u.tenant_id, 'mcp.server.recovered', u.server_id, u.module_name,
           u.from_status, u.status, u.trace_id, u.last_heartbeat_at,
           mcp_audit_body(u.server_id, u.module_name, u.status, u.version, u.supported_protocols,
                          (SELECT jsonb_agg(x.name ORDER BY x.name) FROM restored x WHERE x.server_id = u.server_id))
    FROM upd u
    WHERE u.from_status IN ('degraded', 'unhealthy')
    RETURNING mcp_audit_events.seq, mcp_audit_events.event_id, mcp_audit_events.tenant_id,
              mcp_audit_events.kind, mcp_audit_events.server_id, mcp_audit_events.module_name,
              mcp_audit_events.from_status, mcp_audit_events.to_status,
              mcp_audit_events.trace_id, mcp_audit_events.occurred_at, mcp_audit_events.body
)
SELECT p.tenant_id, p.server_id, p.status,
       u.server_id, u.tenant_id, u.module_name, u.version, u.supported_protocols,
       u.capability_advertisement, u.status, u.last_heartbeat_at, u.registered_at,
       u.deregistered_at, u.trace_id::text, u.remotes, u.description, u.title,
       e.seq, e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
       e.to_status, e.trace_id::text, e.occurred_at, e.body
FROM prev p
LEFT JOIN upd u ON u.server_id = p.server_id
LEFT JOIN ev e ON e.server_id = p.server_id;
END
$$;

CREATE OR REPLACE FUNCTION mcp_sweep(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer) RETURNS TABLE(event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_now             timestamptz := COALESCE(p_now, now());
    v_degraded_before timestamptz := v_now - p_degraded_after;
    v_unhealthy_before timestamptz := v_now - p_unhealthy_after;
    v_rows            tid[];
    v_ids             uuid[];
    v_from            text[];
BEGIN
-- First lock what is due and keep it in arrays: the statement below is then
-- planned knowing how many rows it moves (a mass outage moves thousands,
-- and joins planned for one row would cost seconds).
SELECT array_agg(d.row_id), array_agg(d.server_id), array_agg(d.status)
INTO v_rows, v_ids, v_from
FROM (
    SELECT s.ctid AS row_id, s.server_id, s.status
    FROM mcp_servers s
    WHERE (s.status = 'healthy' AND s.last_heartbeat_at <= v_degraded_before)
       OR (s.status = 'degraded' AND s.last_heartbeat_at <= v_unhealthy_before)
    LIMIT p_limit
    FOR UPDATE OF s SKIP LOCKED
) d;
IF v_ids IS NULL THEN
    RETURN;
END IF;
RETURN QUERY
WITH due AS (
    SELECT d.server_id, d.status FROM unnest(v_ids, v_from) AS d(server_id, status)
),
-- The rows are locked and unchanged since they were read: updated by their
-- row ids (a TID scan, no index probes), their previous status from due.
moved AS (
    UPDATE mcp_servers s
    SET status = CASE WHEN s.last_heartbeat_at <= v_unhealthy_before
                      THEN 'unhealthy' ELSE 'degraded' END
    WHERE s.ctid = ANY (v_rows)
    RETURNING s.server_id, s.tenant_id, s.module_name, s.status AS to_status, s.trace_id, s.version,
              s.supported_protocols, v_now AS now
),
cascaded AS (
    UPDATE mcp_skills k
    SET available = false, unavailable_reason = 'server_unhealthy'
    FROM moved m
    WHERE k.server_id = m.server_id AND m.to_status = 'unhealthy' AND k.available
    RETURNING k.server_id, k.name
),
affected AS (
    SELECT a.server_id, array_agg(a.name ORDER BY a.name) AS names
    FROM cascaded a
    GROUP BY a.server_id
),
events AS (
    INSERT INTO mcp_audit_events
        (event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
         trace_id, occurred_at, body)
    SELECT gen_random_uuid(), m.tenant_id, 'mcp.server.' || m.to_status, m.server_id,
           m.module_name, d.status, m.to_status, m.trace_id, m.now,
           mcp_audit_body(m.server_id, m.module_name, m.to_status, m.version, m.supported_protocols,
                          to_jsonb(a.names))
    FROM moved m
    JOIN due d ON d.server_id = m.server_id
    LEFT JOIN affected a ON a.server_id = m.server_id
    RETURNING mcp_audit_events.seq, mcp_audit_events.event_id, mcp_audit_events.tenant_id,
              mcp_audit_events.kind, mcp_audit_events.server_id, mcp_audit_events.module_name,
              mcp_audit_events.from_status, mcp_audit_events.to_status,
              mcp_audit_events.trace_id, mcp_audit_events.occurred_at, mcp_audit_events.body
)
SELECT e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
       e.to_status, e.trace_id::text, e.occurred_at, e.body
FROM events e
ORDER BY e.seq;
END
$$;

DROP FUNCTION mcp_alert_pending(text);
DROP FUNCTION mcp_alert_ack(text, uuid, uuid[], bigint[]);
DROP FUNCTION mcp_alert_claim(text, uuid, integer);
DROP FUNCTION mcp_feed_read(uuid[], bigint[], integer);
DROP FUNCTION mcp_feed_horizon(uuid);
DROP FUNCTION mcp_feed_epoch();
DROP FUNCTION mcp_feed_next(uuid, text, text);

ALTER TABLE mcp_audit_events ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
ALTER TABLE mcp_alert_cursors ADD COLUMN last_txid xid8 NOT NULL DEFAULT '0'::xid8,
                              ADD COLUMN last_seq bigint NOT NULL DEFAULT 0;
-- A destination's cursor: past the events it acknowledged of every tenant,
-- as far as one sequence can say (at least once: the rest again).
UPDATE mcp_alert_cursors c
SET last_txid = pg_current_xact_id(),
    last_seq = COALESCE((
        SELECT min(e.seq) - 1 FROM mcp_audit_events e
        LEFT JOIN mcp_alert_positions p ON p.destination = c.destination AND p.tenant_id = e.tenant_id
        WHERE e.position > COALESCE(p.position, 0)), (SELECT COALESCE(max(seq), 0) FROM mcp_audit_events));
DROP TABLE mcp_alert_positions;

CREATE INDEX mcp_audit_events_feed_idx ON mcp_audit_events (txid, seq);
CREATE INDEX mcp_audit_events_tenant_txid_idx ON mcp_audit_events (tenant_id, txid, seq);
CREATE INDEX mcp_audit_events_alert_idx ON mcp_audit_events (txid, seq)
    WHERE kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
       OR (kind = 'mcp.server.registered' AND from_status = 'unhealthy');
DROP INDEX mcp_audit_events_tenant_alert_idx;
DROP INDEX mcp_audit_events_tenant_position_idx;
ALTER TABLE mcp_audit_events DROP COLUMN position;
DROP TABLE mcp_tenant_feed;

CREATE FUNCTION mcp_feed_horizon(OUT timeline bigint, OUT horizon xid8) RETURNS record
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;
REVOKE ALL ON FUNCTION mcp_feed_horizon() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_horizon() TO cyberos_app;

CREATE FUNCTION mcp_feed_read(p_txid xid8, p_seq bigint, p_limit integer) RETURNS TABLE(timeline bigint, horizon xid8, txid xid8, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;
REVOKE ALL ON FUNCTION mcp_feed_read(xid8, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_read(xid8, bigint, integer) TO cyberos_app;

CREATE FUNCTION mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer) RETURNS TABLE(txid text, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;
REVOKE ALL ON FUNCTION mcp_alert_claim(text, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_claim(text, uuid, integer) TO cyberos_app;

CREATE FUNCTION mcp_alert_ack(p_destination text, p_claimant uuid, p_txid text, p_seq bigint) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    UPDATE mcp_alert_cursors c
    SET last_txid     = CASE WHEN (c.last_txid, c.last_seq) < (p_txid::xid8, p_seq) THEN p_txid::xid8 ELSE c.last_txid END,
        last_seq      = CASE WHEN (c.last_txid, c.last_seq) < (p_txid::xid8, p_seq) THEN p_seq ELSE c.last_seq END,
        updated_at    = CASE WHEN (c.last_txid, c.last_seq) < (p_txid::xid8, p_seq) THEN now() ELSE c.updated_at END,
        claimed_by    = CASE WHEN c.claimed_by = p_claimant THEN NULL ELSE c.claimed_by END,
        claimed_until = CASE WHEN c.claimed_by = p_claimant THEN NULL ELSE c.claimed_until END
    WHERE c.destination = p_destination
      AND ((c.last_txid, c.last_seq) < (p_txid::xid8, p_seq) OR c.claimed_by = p_claimant);
$$;
REVOKE ALL ON FUNCTION mcp_alert_ack(text, uuid, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_ack(text, uuid, text, bigint) TO cyberos_app;

CREATE FUNCTION mcp_alert_pending(p_destination text) RETURNS TABLE(pending bigint, oldest timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    SELECT count(*), min(e.occurred_at)
    FROM mcp_audit_events e
    LEFT JOIN mcp_alert_cursors c ON c.destination = p_destination
    WHERE (e.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
           OR (e.kind = 'mcp.server.registered' AND e.from_status = 'unhealthy'))
      AND (e.txid, e.seq) > (COALESCE(c.last_txid, '0'::xid8), COALESCE(c.last_seq, 0));
$$;
REVOKE ALL ON FUNCTION mcp_alert_pending(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_pending(text) TO cyberos_app;

