-- Feed positions per tenant (issue 30). A tenant's events have positions
-- of their own, 1, 2, 3, … in commit order and without gaps, taken from the
-- tenant's row of mcp_tenant_feed in the event's own transaction: the row
-- lock orders the tenant's writers (the next one takes its position only
-- after the previous one committed), so a reader that sees position n sees
-- every position before it, and a read of the counter and of the events in
-- one snapshot agree. No position depends on a transaction id or on one
-- node's snapshot, which is what lets the trail be distributed by tenant
-- (Citus), and a long transaction anywhere no longer holds the feed or the
-- alert outbox back (0009, 0014, 0016).

CREATE TABLE mcp_tenant_feed (
    tenant_id      uuid PRIMARY KEY,
    -- position is the position of the tenant's latest event (0: none).
    position       bigint NOT NULL DEFAULT 0 CHECK (position >= 0),
    -- alert_position is the position of its latest alert event.
    alert_position bigint NOT NULL DEFAULT 0 CHECK (alert_position >= 0)
);
ALTER TABLE mcp_tenant_feed ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_feed_rls ON mcp_tenant_feed
    USING (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid);
GRANT SELECT ON mcp_tenant_feed TO cyberos_app;

-- The events of each tenant numbered in the order of the old positions
-- (txid, seq), which was their commit order.
ALTER TABLE mcp_audit_events ADD COLUMN position bigint;
UPDATE mcp_audit_events e SET position = n.position
FROM (SELECT seq, row_number() OVER (PARTITION BY tenant_id ORDER BY txid, seq) AS position
      FROM mcp_audit_events) n
WHERE e.seq = n.seq;
ALTER TABLE mcp_audit_events ALTER COLUMN position SET NOT NULL;
CREATE UNIQUE INDEX mcp_audit_events_tenant_position_idx ON mcp_audit_events (tenant_id, position);
-- The alert outbox reads a tenant's alert events after a position.
CREATE INDEX mcp_audit_events_tenant_alert_idx ON mcp_audit_events (tenant_id, position)
    WHERE kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
       OR (kind = 'mcp.server.registered' AND from_status = 'unhealthy');

INSERT INTO mcp_tenant_feed (tenant_id, position, alert_position)
SELECT tenant_id, max(position),
       COALESCE(max(position) FILTER (
           WHERE kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
              OR (kind = 'mcp.server.registered' AND from_status = 'unhealthy')), 0)
FROM mcp_audit_events GROUP BY tenant_id;

-- The alert outbox: each destination's cursor is a position per tenant;
-- the lease stays on mcp_alert_cursors.
CREATE TABLE mcp_alert_positions (
    destination text NOT NULL,
    tenant_id   uuid NOT NULL,
    position    bigint NOT NULL CHECK (position >= 0),
    PRIMARY KEY (destination, tenant_id)
);
INSERT INTO mcp_alert_positions (destination, tenant_id, position)
SELECT c.destination, e.tenant_id, max(e.position)
FROM mcp_alert_cursors c
JOIN mcp_audit_events e ON (e.txid, e.seq) <= (c.last_txid, c.last_seq)
GROUP BY c.destination, e.tenant_id;

DROP FUNCTION mcp_alert_claim(text, uuid, integer);
DROP FUNCTION mcp_alert_ack(text, uuid, text, bigint);
DROP FUNCTION mcp_alert_pending(text);
DROP FUNCTION mcp_feed_read(xid8, bigint, integer);
DROP FUNCTION mcp_feed_horizon();
DROP INDEX mcp_audit_events_alert_idx;
DROP INDEX mcp_audit_events_feed_idx;
DROP INDEX mcp_audit_events_tenant_txid_idx;
ALTER TABLE mcp_audit_events DROP COLUMN txid;
ALTER TABLE mcp_alert_cursors DROP COLUMN last_txid, DROP COLUMN last_seq;

-- mcp_feed_next takes the next position of p_tenant for an event of
-- p_kind from p_from, locking the tenant's row until the transaction ends.
-- Every writer takes its locks in one order, so that none can deadlock:
-- the servers (in server_id order), the tenant's live count
-- (mcp_tenant_servers), then the counters (writers of several tenants
-- lock them first in tenant_id order).
CREATE FUNCTION mcp_feed_next(p_tenant uuid, p_kind text, p_from text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
DECLARE
    v_alert boolean := p_kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
                       OR (p_kind = 'mcp.server.registered' AND p_from IS NOT DISTINCT FROM 'unhealthy');
    v_position bigint;
BEGIN
    INSERT INTO mcp_tenant_feed AS f (tenant_id, position, alert_position)
    VALUES (p_tenant, 1, CASE WHEN v_alert THEN 1 ELSE 0 END)
    ON CONFLICT (tenant_id) DO UPDATE
    SET position = f.position + 1,
        alert_position = CASE WHEN v_alert THEN f.position + 1 ELSE f.alert_position END
    RETURNING f.position INTO v_position;
    RETURN v_position;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_feed_next(uuid, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_next(uuid, text, text) TO cyberos_app;

-- mcp_feed_epoch names the history positions belong to: the timeline (a
-- failover starts a new one, and positions of another are expired).
CREATE FUNCTION mcp_feed_epoch()
RETURNS bigint
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
BEGIN
    RETURN ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_feed_epoch() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_epoch() TO cyberos_app;

-- mcp_feed_horizon is p_tenant's present position: read before a list, so
-- that a watch from it misses nothing the list does not reflect.
CREATE FUNCTION mcp_feed_horizon(p_tenant uuid, OUT epoch bigint, OUT pos bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
DECLARE
    v_position bigint;
BEGIN
    SELECT f.position INTO v_position FROM mcp_tenant_feed f WHERE f.tenant_id = p_tenant;
    epoch := mcp_feed_epoch();
    pos := COALESCE(v_position, 0);
END
$fn$;
REVOKE ALL ON FUNCTION mcp_feed_horizon(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_horizon(uuid) TO cyberos_app;

-- mcp_feed_read returns, for each tenant p_tenants[i], up to p_limit of its
-- events after position p_after[i], each row carrying the tenant's position
-- of the same snapshot (horizon); a tenant without new events has one row of
-- its horizon alone (seq NULL). One statement, one snapshot.
CREATE FUNCTION mcp_feed_read(p_tenants uuid[], p_after bigint[], p_limit integer)
RETURNS TABLE (
    epoch       bigint,
    feed_tenant uuid,
    horizon     bigint,
    event_position bigint,
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
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_epoch bigint := mcp_feed_epoch();
BEGIN
    RETURN QUERY
    SELECT v_epoch, r.tenant, COALESCE(f.position, 0), e.position, e.seq, e.event_id, e.tenant_id, e.kind,
           e.server_id, e.module_name, e.from_status, e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM unnest(p_tenants, p_after) WITH ORDINALITY AS r(tenant, after, ord)
    LEFT JOIN mcp_tenant_feed f ON f.tenant_id = r.tenant
    LEFT JOIN LATERAL (
        SELECT a.* FROM mcp_audit_events a
        WHERE a.tenant_id = r.tenant AND a.position > r.after AND a.position <= f.position
        ORDER BY a.position
        LIMIT p_limit
    ) e ON true
    ORDER BY r.ord, e.position;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_feed_read(uuid[], bigint[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_read(uuid[], bigint[], integer) TO cyberos_app;

-- mcp_alert_claim returns up to p_limit alert events after
-- p_destination's positions, when p_claimant holds its lease; nothing
-- otherwise. Only the tenants whose latest alert event is past the
-- destination's position are read; events by tenant, in position order.
CREATE FUNCTION mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer)
RETURNS TABLE (
    event_position bigint,
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
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    PERFORM 1 FROM mcp_alert_cursors c
    WHERE c.destination = p_destination AND c.claimed_by = p_claimant;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT e.position, e.seq, e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name,
           e.from_status, e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM mcp_tenant_feed f
    LEFT JOIN mcp_alert_positions p ON p.destination = p_destination AND p.tenant_id = f.tenant_id
    CROSS JOIN LATERAL (
        SELECT a.* FROM mcp_audit_events a
        WHERE a.tenant_id = f.tenant_id
          AND (a.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
               OR (a.kind = 'mcp.server.registered' AND a.from_status = 'unhealthy'))
          AND a.position > COALESCE(p.position, 0)
        ORDER BY a.position
        LIMIT p_limit
    ) e
    WHERE f.alert_position > COALESCE(p.position, 0)
    ORDER BY e.occurred_at, e.tenant_id, e.position
    LIMIT p_limit;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_alert_claim(text, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_claim(text, uuid, integer) TO cyberos_app;

-- mcp_alert_ack moves p_destination's position of each tenant
-- p_tenants[i] to p_positions[i] (never back: events delivered stay
-- delivered, also by a claimant whose lease ran out) and ends p_claimant's
-- lease; with NULL arrays it only ends the lease.
CREATE FUNCTION mcp_alert_ack(p_destination text, p_claimant uuid, p_tenants uuid[], p_positions bigint[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
BEGIN
    INSERT INTO mcp_alert_positions AS p (destination, tenant_id, position)
    SELECT p_destination, r.tenant_id, r.position
    FROM unnest(p_tenants, p_positions) AS r(tenant_id, position)
    ORDER BY r.tenant_id
    ON CONFLICT (destination, tenant_id) DO UPDATE
    SET position = GREATEST(p.position, EXCLUDED.position);
    UPDATE mcp_alert_cursors c
    SET claimed_by = NULL, claimed_until = NULL, updated_at = clock_timestamp()
    WHERE c.destination = p_destination AND c.claimed_by = p_claimant;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_alert_ack(text, uuid, uuid[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_ack(text, uuid, uuid[], bigint[]) TO cyberos_app;

-- mcp_alert_pending counts p_destination's unacknowledged alert events and
-- when the oldest of them occurred.
CREATE FUNCTION mcp_alert_pending(p_destination text)
RETURNS TABLE (pending bigint, oldest timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    SELECT count(*), min(a.occurred_at)
    FROM mcp_tenant_feed f
    LEFT JOIN mcp_alert_positions p ON p.destination = p_destination AND p.tenant_id = f.tenant_id
    JOIN mcp_audit_events a ON a.tenant_id = f.tenant_id AND a.position > COALESCE(p.position, 0)
    WHERE f.alert_position > COALESCE(p.position, 0)
      AND (a.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
           OR (a.kind = 'mcp.server.registered' AND a.from_status = 'unhealthy'));
END
$fn$;
REVOKE ALL ON FUNCTION mcp_alert_pending(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_pending(text) TO cyberos_app;

-- The heartbeat and the sweep take their events' positions.
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
-- Then the counters of the tenants whose servers recover (their events
-- take positions), in tenant_id order, as every writer of several tenants
-- takes them: after the servers, as every writer takes them.
PERFORM 1 FROM mcp_tenant_feed f
WHERE f.tenant_id IN (
    SELECT s.tenant_id FROM mcp_servers s
    JOIN unnest(p_tenants, p_servers) AS r(tenant_id, server_id)
      ON s.server_id = r.server_id AND s.tenant_id = r.tenant_id
    WHERE s.status IN ('degraded', 'unhealthy'))
ORDER BY f.tenant_id
FOR UPDATE OF f;

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
         trace_id, occurred_at, body, position)
    SELECT gen_random_uuid(), u.tenant_id, 'mcp.server.recovered', u.server_id, u.module_name,
           u.from_status, u.status, u.trace_id, u.last_heartbeat_at,
           mcp_audit_body(u.server_id, u.module_name, u.status, u.version, u.supported_protocols,
                          (SELECT jsonb_agg(x.name ORDER BY x.name) FROM restored x WHERE x.server_id = u.server_id)),
           mcp_feed_next(u.tenant_id, 'mcp.server.recovered', u.from_status)
    FROM upd u
    WHERE u.from_status IN ('degraded', 'unhealthy')
    ORDER BY u.tenant_id, u.server_id
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
-- The positions of the events below: the tenants' counters locked in
-- tenant_id order, as every writer of several tenants takes them.
PERFORM 1 FROM mcp_tenant_feed f
WHERE f.tenant_id IN (SELECT s.tenant_id FROM mcp_servers s WHERE s.ctid = ANY (v_rows))
ORDER BY f.tenant_id
FOR UPDATE OF f;
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
         trace_id, occurred_at, body, position)
    SELECT gen_random_uuid(), m.tenant_id, 'mcp.server.' || m.to_status, m.server_id,
           m.module_name, d.status, m.to_status, m.trace_id, m.now,
           mcp_audit_body(m.server_id, m.module_name, m.to_status, m.version, m.supported_protocols,
                          to_jsonb(a.names)),
           mcp_feed_next(m.tenant_id, 'mcp.server.' || m.to_status, d.status)
    FROM moved m
    JOIN due d ON d.server_id = m.server_id
    LEFT JOIN affected a ON a.server_id = m.server_id
    ORDER BY m.tenant_id, m.server_id
    RETURNING mcp_audit_events.seq, mcp_audit_events.position, mcp_audit_events.event_id, mcp_audit_events.tenant_id,
              mcp_audit_events.kind, mcp_audit_events.server_id, mcp_audit_events.module_name,
              mcp_audit_events.from_status, mcp_audit_events.to_status,
              mcp_audit_events.trace_id, mcp_audit_events.occurred_at, mcp_audit_events.body
)
SELECT e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
       e.to_status, e.trace_id::text, e.occurred_at, e.body
FROM events e
ORDER BY e.tenant_id, e.position;
END
$$;
