-- Back to the triggers of 0012 and 0015.
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

REVOKE UPDATE (status_changed_at) ON mcp_servers FROM cyberos_app;

CREATE FUNCTION mcp_servers_capability_bytes() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    NEW.capability_bytes := COALESCE(octet_length(NEW.capability_advertisement::text), 0);
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION mcp_servers_capability_bytes() FROM PUBLIC;
ALTER TABLE mcp_servers DROP COLUMN capability_bytes;
ALTER TABLE mcp_servers ADD COLUMN capability_bytes integer NOT NULL DEFAULT 0;
UPDATE mcp_servers SET capability_bytes = COALESCE(octet_length(capability_advertisement::text), 0);
CREATE TRIGGER mcp_servers_capability_bytes BEFORE INSERT OR UPDATE OF capability_advertisement ON mcp_servers FOR EACH ROW EXECUTE FUNCTION mcp_servers_capability_bytes();

CREATE FUNCTION mcp_servers_count_live() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    v_delta integer := CASE WHEN NEW.status = 'deregistered' THEN -1 ELSE 1 END;
BEGIN
    INSERT INTO mcp_tenant_servers AS t (tenant_id, live) VALUES (NEW.tenant_id, GREATEST(v_delta, 0))
    ON CONFLICT (tenant_id) DO UPDATE SET live = t.live + v_delta;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION mcp_servers_count_live() FROM PUBLIC;
CREATE TRIGGER mcp_servers_count_live_insert AFTER INSERT ON mcp_servers FOR EACH ROW WHEN ((new.status <> 'deregistered'::text)) EXECUTE FUNCTION mcp_servers_count_live();
CREATE TRIGGER mcp_servers_count_live_update AFTER UPDATE OF status ON mcp_servers FOR EACH ROW WHEN (((old.status = 'deregistered'::text) <> (new.status = 'deregistered'::text))) EXECUTE FUNCTION mcp_servers_count_live();

CREATE FUNCTION mcp_servers_status_changed() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    UPDATE mcp_servers s SET status_changed_at = e.at
    FROM (SELECT n.server_id, max(n.occurred_at) AS at FROM mcp_new_events n GROUP BY n.server_id) e
    WHERE s.server_id = e.server_id AND s.status_changed_at IS DISTINCT FROM e.at;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION mcp_servers_status_changed() FROM PUBLIC;
CREATE TRIGGER mcp_audit_events_status_changed AFTER INSERT ON mcp_audit_events REFERENCING NEW TABLE AS mcp_new_events FOR EACH STATEMENT EXECUTE FUNCTION mcp_servers_status_changed();
