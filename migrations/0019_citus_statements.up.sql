-- Statements that Citus can run (issue 30).

-- mcp_set_tenant scopes the current transaction to p_tenant: SET LOCAL
-- auth.tenant_id, which row-level security reads. Citus carries SET LOCAL
-- to the workers (with citus.propagate_set_commands = local, set here for
-- the transaction), a set_config it does not; on plain PostgreSQL the
-- citus setting is an unused placeholder. Called in explicit transactions
-- only: outside one, SET LOCAL does nothing.
CREATE FUNCTION mcp_set_tenant(p_tenant uuid)
RETURNS void
LANGUAGE plpgsql
AS $fn$
BEGIN
    SET LOCAL citus.propagate_set_commands TO 'local';
    EXECUTE format('SET LOCAL auth.tenant_id TO %L', p_tenant::text);
END
$fn$;
REVOKE ALL ON FUNCTION mcp_set_tenant(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_set_tenant(uuid) TO cyberos_app;

-- mcp_now is p_now, or the transaction's time when it is NULL (the tests'
-- clock, or the database's): a function of its own, which Citus evaluates
-- on the coordinator, where it refuses now() inside COALESCE or CASE of a
-- distributed statement.
CREATE FUNCTION mcp_now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
AS $fn$
BEGIN
    RETURN COALESCE(p_now, now());
END
$fn$;
GRANT EXECUTE ON FUNCTION mcp_now(timestamptz) TO cyberos_app;

-- mcp_feed_next runs as its caller: on Citus, a transaction that changed a
-- shard as cyberos_app cannot touch it again as another role (a SECURITY
-- DEFINER function's owner). The app takes its own tenant's positions,
-- which row-level security confines it to.
ALTER FUNCTION mcp_feed_next(uuid, text, text) SECURITY INVOKER;
GRANT INSERT, UPDATE (position, alert_position) ON mcp_tenant_feed TO cyberos_app;

-- mcp_heartbeat_tenant is mcp_heartbeat (0018) for the servers p_servers
-- of one tenant, in plain statements that each name tenant_id = p_tenant,
-- so that Citus routes every one to the tenant's shard and nothing reaches
-- another node (mcp_heartbeat's join of the pairs cannot be routed and
-- takes locks across shards; a data-modifying CTE feeding an INSERT is run
-- through every node). The recovery events' positions are taken from the
-- tenant's counter before they are written. Planned for each call's values
-- (a generic plan cannot be routed). mcpd calls it on Citus, once per
-- tenant of a batch.
CREATE FUNCTION mcp_heartbeat_tenant(p_tenant uuid, p_servers uuid[], p_now timestamptz)
RETURNS TABLE (
    o_tenant_id uuid, o_server_id uuid, o_prev_status text,
    s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[],
    s_capabilities jsonb, s_status text, s_last_heartbeat timestamptz, s_registered_at timestamptz,
    s_deregistered_at timestamptz, s_trace_id text, s_remotes jsonb, s_description text, s_title text,
    e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text,
    e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamptz, e_body jsonb
)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := COALESCE(p_now, now());
    v_ids     uuid[];
    v_prev    text[];
    v_live    uuid[];
    v_rec     uuid[];
    v_from    text[];
    v_first   bigint := 0;
    v_names   jsonb;
    v_module   text;
    v_trace    character(32);
    v_version  text;
    v_protocols text[];
BEGIN
    -- Lock first, in server_id order, as mcp_heartbeat does.
    SELECT array_agg(l.server_id ORDER BY l.server_id), array_agg(l.status ORDER BY l.server_id)
    INTO v_ids, v_prev
    FROM (SELECT s.server_id, s.status FROM mcp_servers s
          WHERE s.tenant_id = p_tenant AND s.server_id = ANY (p_servers)
          ORDER BY s.server_id
          FOR UPDATE OF s) l;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg(x.id ORDER BY x.id) FILTER (WHERE x.st <> 'deregistered'),
           array_agg(x.id ORDER BY x.id) FILTER (WHERE x.st IN ('degraded', 'unhealthy')),
           array_agg(x.st ORDER BY x.id) FILTER (WHERE x.st IN ('degraded', 'unhealthy'))
    INTO v_live, v_rec, v_from
    FROM unnest(v_ids, v_prev) AS x(id, st);
    IF v_rec IS NOT NULL THEN
        -- Recovered is an alert kind: both positions move.
        UPDATE mcp_tenant_feed f
        SET position = f.position + cardinality(v_rec), alert_position = f.position + cardinality(v_rec)
        WHERE f.tenant_id = p_tenant
        RETURNING f.position - cardinality(v_rec) INTO v_first;
    END IF;
    IF v_live IS NOT NULL THEN
        UPDATE mcp_servers s
        SET last_heartbeat_at = v_now, status = 'healthy',
            status_changed_at = CASE WHEN s.status = 'healthy' THEN s.status_changed_at ELSE v_now END
        WHERE s.tenant_id = p_tenant AND s.server_id = ANY (v_live);
    END IF;
    FOR i IN 1 .. COALESCE(cardinality(v_rec), 0) LOOP
        v_names := NULL;
        IF v_from[i] = 'unhealthy' THEN
            SELECT jsonb_agg(k.name ORDER BY k.name) INTO v_names
            FROM mcp_skills k
            WHERE k.tenant_id = p_tenant AND k.server_id = v_rec[i] AND k.unavailable_reason = 'server_unhealthy';
            UPDATE mcp_skills k
            SET available = true, unavailable_reason = NULL
            WHERE k.tenant_id = p_tenant AND k.server_id = v_rec[i] AND k.unavailable_reason = 'server_unhealthy';
        END IF;
        -- Read, then INSERT ... VALUES: Citus sends an INSERT ... SELECT
        -- of parameters to every shard.
        SELECT s.module_name, s.trace_id, s.version, s.supported_protocols
        INTO v_module, v_trace, v_version, v_protocols
        FROM mcp_servers s
        WHERE s.tenant_id = p_tenant AND s.server_id = v_rec[i];
        INSERT INTO mcp_audit_events
            (event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
             trace_id, occurred_at, body, position)
        VALUES (gen_random_uuid(), p_tenant, 'mcp.server.recovered', v_rec[i], v_module, v_from[i], 'healthy',
                v_trace, v_now, mcp_audit_body(v_rec[i], v_module, 'healthy', v_version, v_protocols, v_names),
                v_first + i);
    END LOOP;
    RETURN QUERY
    SELECT s.tenant_id, s.server_id, v_prev[array_position(v_ids, s.server_id)],
           s.server_id, s.tenant_id, s.module_name, s.version, s.supported_protocols,
           s.capability_advertisement, s.status, s.last_heartbeat_at, s.registered_at,
           s.deregistered_at, s.trace_id::text, s.remotes, s.description, s.title,
           e.seq, e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
           e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM mcp_servers s
    LEFT JOIN mcp_audit_events e
           ON e.tenant_id = s.tenant_id AND e.server_id = s.server_id AND e.position > v_first
              AND e.position <= v_first + COALESCE(cardinality(v_rec), 0)
    WHERE s.tenant_id = p_tenant AND s.server_id = ANY (v_ids);
END
$fn$;
REVOKE ALL ON FUNCTION mcp_heartbeat_tenant(uuid, uuid[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat_tenant(uuid, uuid[], timestamptz) TO cyberos_app;

-- The sweep on Citus, one tenant per statement and per transaction: a
-- worker that is down fails its own tenants' sweeps only (they stay as
-- they are: blind, as in a database outage) while the others go on, and
-- no statement locks across shards. mcpd calls mcp_sweep_guard, then
-- mcp_sweep_tenants, then mcp_sweep_tenant for each; on plain PostgreSQL
-- it keeps mcp_sweep_guarded and mcp_sweep (one statement for every
-- tenant).

-- mcp_sweep_guard is the blind-window rule of mcp_sweep_guarded (0006) on
-- its own: it records this sweep and returns the degraded and unhealthy
-- lags to sweep with (1000 years: nothing of that kind is due yet), the
-- window and whether it is new; proceed is false while another replica
-- holds the state (sweeping now).
CREATE FUNCTION mcp_sweep_guard(p_now timestamptz, p_degraded_after interval, p_unhealthy_after interval,
                                p_blind_after interval)
RETURNS TABLE (proceed boolean, degraded_after interval, unhealthy_after interval,
               blind_from timestamptz, blind_until timestamptz, blind_new boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_now   timestamptz := COALESCE(p_now, now());
    v_last  timestamptz;
    v_from  timestamptz;
    v_until timestamptz;
    v_new   boolean := false;
    v_deg   interval := p_degraded_after;
    v_unh   interval := p_unhealthy_after;
BEGIN
    SELECT st.last_sweep_at, st.blind_from, st.blind_until INTO v_last, v_from, v_until
    FROM mcp_monitor_state st WHERE st.id
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, NULL::interval, NULL::interval, NULL::timestamptz, NULL::timestamptz, false;
        RETURN;
    END IF;
    IF v_last IS NOT NULL AND p_blind_after IS NOT NULL AND p_blind_after > interval '0'
       AND v_now - v_last > p_blind_after THEN
        v_new := true;
        v_from := v_last;
        v_until := v_now;
    END IF;
    UPDATE mcp_monitor_state st
    SET last_sweep_at = GREATEST(v_now, COALESCE(st.last_sweep_at, v_now)),
        blind_from = v_from, blind_until = v_until,
        blind_windows = st.blind_windows + (v_new::integer)
    WHERE st.id;
    IF v_until IS NOT NULL AND v_until > v_now - p_degraded_after THEN
        v_deg := interval '1000 years';
    END IF;
    IF v_until IS NOT NULL AND v_until > v_now - p_unhealthy_after THEN
        v_unh := interval '1000 years';
    END IF;
    RETURN QUERY SELECT true, v_deg, v_unh, v_from, v_until, v_new;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_sweep_guard(timestamptz, interval, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_guard(timestamptz, interval, interval, interval) TO cyberos_app;

-- mcp_sweep_tenants lists the tenants that have live servers (a read of
-- every shard, without a lock).
CREATE FUNCTION mcp_sweep_tenants()
RETURNS TABLE (tenant_id uuid)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
BEGIN
    RETURN QUERY SELECT t.tenant_id FROM mcp_tenant_servers t WHERE t.live > 0 ORDER BY t.tenant_id;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_sweep_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_tenants() TO cyberos_app;

-- A tenant's own blind window: on Citus a worker that is down keeps its
-- tenants from being swept while the others are; when it returns, the
-- blind-window rule (0006) applies to those tenants alone, from their last
-- sweep (mcp_sweep_tenant).
ALTER TABLE mcp_tenant_servers ADD COLUMN last_sweep_at timestamptz, ADD COLUMN blind_until timestamptz;

-- mcp_sweep_tenant is mcp_sweep (0018) for one tenant: at most p_limit of
-- its silent live servers move, each statement routed to the tenant's
-- shard; the events' positions are taken from the tenant's counter before
-- they are written (unhealthy is an alert kind, degraded not). With
-- p_blind_after, the tenant's last sweep older than that opens the
-- tenant's blind window: its servers get their full intervals from its
-- end, as after a registry-wide outage.
CREATE FUNCTION mcp_sweep_tenant(p_tenant uuid, p_now timestamptz, p_degraded_after interval,
                                 p_unhealthy_after interval, p_limit integer, p_blind_after interval)
RETURNS TABLE (event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text,
               to_status text, trace_id text, occurred_at timestamptz, body jsonb)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now              timestamptz := COALESCE(p_now, now());
    v_degraded_before  timestamptz := v_now - p_degraded_after;
    v_unhealthy_before timestamptz := v_now - p_unhealthy_after;
    v_ids   uuid[];
    v_from  text[];
    v_to    text[];
    v_pos   bigint[];
    v_n     integer;
    v_last  bigint;
    v_alert bigint;
    v_swept timestamptz;
    v_until timestamptz;
    v_names jsonb;
    v_deg   uuid[];
    v_unh   uuid[];
    v_module   text;
    v_trace    character(32);
    v_version  text;
    v_protocols text[];
BEGIN
    IF p_blind_after IS NOT NULL AND p_blind_after > interval '0' THEN
        SELECT t.last_sweep_at, t.blind_until INTO v_swept, v_until
        FROM mcp_tenant_servers t WHERE t.tenant_id = p_tenant
        FOR UPDATE;
        IF v_swept IS NOT NULL AND v_now - v_swept > p_blind_after THEN
            v_until := v_now;
        END IF;
        UPDATE mcp_tenant_servers t
        SET last_sweep_at = GREATEST(v_now, COALESCE(t.last_sweep_at, v_now)), blind_until = v_until
        WHERE t.tenant_id = p_tenant;
        IF v_until IS NOT NULL AND v_until > v_now - p_degraded_after THEN
            v_degraded_before := v_now - interval '1000 years';
        END IF;
        IF v_until IS NOT NULL AND v_until > v_now - p_unhealthy_after THEN
            v_unhealthy_before := v_now - interval '1000 years';
        END IF;
    END IF;
    SELECT array_agg(d.server_id ORDER BY d.server_id), array_agg(d.status ORDER BY d.server_id),
           array_agg(d.to_status ORDER BY d.server_id)
    INTO v_ids, v_from, v_to
    FROM (
        SELECT s.server_id, s.status,
               CASE WHEN s.last_heartbeat_at <= v_unhealthy_before THEN 'unhealthy' ELSE 'degraded' END AS to_status
        FROM mcp_servers s
        WHERE s.tenant_id = p_tenant
          AND ((s.status = 'healthy' AND s.last_heartbeat_at <= v_degraded_before)
               OR (s.status = 'degraded' AND s.last_heartbeat_at <= v_unhealthy_before))
        LIMIT p_limit
        FOR UPDATE OF s SKIP LOCKED
    ) d;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    v_n := cardinality(v_ids);
    UPDATE mcp_tenant_feed f SET position = f.position + v_n
    WHERE f.tenant_id = p_tenant
    RETURNING f.position INTO v_last;
    SELECT array_agg(v_last - v_n + i ORDER BY i),
           max(v_last - v_n + i) FILTER (WHERE v_to[i] = 'unhealthy')
    INTO v_pos, v_alert
    FROM generate_subscripts(v_ids, 1) AS i;
    IF v_alert IS NOT NULL THEN
        UPDATE mcp_tenant_feed f SET alert_position = v_alert WHERE f.tenant_id = p_tenant;
    END IF;
    -- Plain statements, each routed to the tenant's shard (a data-modifying
    -- CTE feeding an INSERT would run through every node).
    -- The ids of each kind as values: a subquery over the arrays in the
    -- UPDATE would be planned apart and sent to every node.
    v_deg := ARRAY(SELECT v_ids[k] FROM generate_subscripts(v_ids, 1) k WHERE v_to[k] = 'degraded');
    v_unh := ARRAY(SELECT v_ids[k] FROM generate_subscripts(v_ids, 1) k WHERE v_to[k] = 'unhealthy');
    UPDATE mcp_servers s
    SET status = 'degraded', status_changed_at = v_now
    WHERE s.tenant_id = p_tenant AND s.server_id = ANY (v_deg);
    UPDATE mcp_servers s
    SET status = 'unhealthy', status_changed_at = v_now
    WHERE s.tenant_id = p_tenant AND s.server_id = ANY (v_unh);
    FOR k IN 1 .. v_n LOOP
        v_names := NULL;
        IF v_to[k] = 'unhealthy' THEN
            SELECT jsonb_agg(x.name ORDER BY x.name) INTO v_names
            FROM mcp_skills x
            WHERE x.tenant_id = p_tenant AND x.server_id = v_ids[k] AND x.available;
            UPDATE mcp_skills x
            SET available = false, unavailable_reason = 'server_unhealthy'
            WHERE x.tenant_id = p_tenant AND x.server_id = v_ids[k] AND x.available;
        END IF;
        -- Read, then INSERT ... VALUES: Citus sends an INSERT ... SELECT
        -- of parameters to every shard.
        SELECT s.module_name, s.trace_id, s.version, s.supported_protocols
        INTO v_module, v_trace, v_version, v_protocols
        FROM mcp_servers s
        WHERE s.tenant_id = p_tenant AND s.server_id = v_ids[k];
        INSERT INTO mcp_audit_events
            (event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
             trace_id, occurred_at, body, position)
        VALUES (gen_random_uuid(), p_tenant, 'mcp.server.' || v_to[k], v_ids[k], v_module, v_from[k], v_to[k],
                v_trace, v_now, mcp_audit_body(v_ids[k], v_module, v_to[k], v_version, v_protocols, v_names),
                v_pos[k]);
    END LOOP;
    RETURN QUERY
    SELECT e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
           e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM mcp_audit_events e
    WHERE e.tenant_id = p_tenant AND e.position > v_last - v_n AND e.position <= v_last
    ORDER BY e.position;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_sweep_tenant(uuid, timestamptz, interval, interval, integer, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_tenant(uuid, timestamptz, interval, interval, integer, interval) TO cyberos_app;

-- The functions that were SQL functions with parameters, which Citus
-- cannot plan ("could not create distributed plan"), as plpgsql; the
-- unhealthy servers' lookup of their events names tenant_id (a join of
-- the distributed tables on their distribution column).

CREATE OR REPLACE FUNCTION mcp_live_counts(p_tenants uuid[]) RETURNS TABLE(tenant_id uuid, live bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.tenant_id, count(*) FROM mcp_servers s
        WHERE s.tenant_id = ANY (p_tenants) AND s.status <> 'deregistered'
        GROUP BY s.tenant_id;
END
$fn$;

CREATE OR REPLACE FUNCTION mcp_skill_alert_states(p_destination text, p_tenants uuid[], p_skills text[]) RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT k.tenant_id, k.skill,
               EXISTS (SELECT 1 FROM mcp_skills s WHERE s.tenant_id = k.tenant_id AND s.name = k.skill AND s.available),
               a.since
        FROM unnest(p_tenants, p_skills) WITH ORDINALITY AS k(tenant_id, skill, ord)
        LEFT JOIN mcp_skill_alerts a
               ON a.destination = p_destination AND a.tenant_id = k.tenant_id AND a.skill = k.skill
        ORDER BY k.ord;
END
$fn$;

CREATE OR REPLACE FUNCTION mcp_skill_alerts_firing(p_destination text) RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT a.tenant_id, a.skill,
               EXISTS (SELECT 1 FROM mcp_skills s WHERE s.tenant_id = a.tenant_id AND s.name = a.skill AND s.available),
               a.since
        FROM mcp_skill_alerts a
        WHERE a.destination = p_destination
        ORDER BY a.tenant_id, a.skill;
END
$fn$;

CREATE OR REPLACE FUNCTION mcp_skill_alerts_record(p_destination text, p_tenants uuid[], p_skills text[], p_since timestamp with time zone[], p_resolved_tenants uuid[], p_resolved_skills text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $fn$
BEGIN
    INSERT INTO mcp_skill_alerts (destination, tenant_id, skill, since)
        SELECT p_destination, r.tenant_id, r.skill, r.since
        FROM unnest(p_tenants, p_skills, p_since) AS r(tenant_id, skill, since)
        ON CONFLICT (destination, tenant_id, skill) DO NOTHING;
        DELETE FROM mcp_skill_alerts a
        USING unnest(p_resolved_tenants, p_resolved_skills) AS r(tenant_id, skill)
        WHERE a.destination = p_destination AND a.tenant_id = r.tenant_id AND a.skill = r.skill;
END
$fn$;

CREATE OR REPLACE FUNCTION mcp_unhealthy_servers() RETURNS TABLE(server_id uuid, tenant_id uuid, module_name text, version text, last_heartbeat_at timestamp with time zone, trace_id text, unhealthy_since timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.server_id, s.tenant_id, s.module_name, s.version, s.last_heartbeat_at, s.trace_id::text,
               (SELECT max(e.occurred_at) FROM mcp_audit_events e
                 WHERE e.tenant_id = s.tenant_id AND e.server_id = s.server_id AND e.kind = 'mcp.server.unhealthy')
        FROM mcp_servers s
        WHERE s.status = 'unhealthy';
END
$fn$;

-- mcp_feed_read_each is mcp_feed_read (0017) one tenant at a time: a
-- statement per tenant, which Citus routes to the tenant's shard (the
-- lateral join over the tenants it cannot plan). mcpd reads the feed with
-- it on Citus.
CREATE FUNCTION mcp_feed_read_each(p_tenants uuid[], p_after bigint[], p_limit integer)
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
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_epoch bigint := mcp_feed_epoch();
    v_horizon bigint;
BEGIN
    FOR i IN 1 .. COALESCE(cardinality(p_tenants), 0) LOOP
        SELECT f.position INTO v_horizon FROM mcp_tenant_feed f WHERE f.tenant_id = p_tenants[i];
        v_horizon := COALESCE(v_horizon, 0);
        -- Every event up to the horizon read above has committed: a later
        -- snapshot sees them all.
        RETURN QUERY
        SELECT v_epoch, p_tenants[i], v_horizon, e.position, e.seq, e.event_id, e.tenant_id, e.kind,
               e.server_id, e.module_name, e.from_status, e.to_status, e.trace_id::text, e.occurred_at, e.body
        FROM (SELECT 1) one
        LEFT JOIN (
            SELECT a.* FROM mcp_audit_events a
            WHERE a.tenant_id = p_tenants[i] AND a.position > p_after[i] AND a.position <= v_horizon
            ORDER BY a.position
            LIMIT p_limit
        ) e ON true
        ORDER BY e.position;
    END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_feed_read_each(uuid[], bigint[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_read_each(uuid[], bigint[], integer) TO cyberos_app;


-- The alert lease and acknowledgement read the clock once, into a
-- variable: Citus refuses volatile functions in an UPDATE of a distributed
-- or reference table.
CREATE OR REPLACE FUNCTION mcp_alert_lease(p_destination text, p_claimant uuid, p_lease interval) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $fn$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    INSERT INTO mcp_alert_cursors (destination) VALUES (p_destination) ON CONFLICT DO NOTHING;
    UPDATE mcp_alert_cursors
    SET claimed_by = p_claimant, claimed_until = v_now + p_lease
    WHERE destination = p_destination
      AND (claimed_by IS NULL OR claimed_by = p_claimant OR claimed_until <= v_now);
    RETURN FOUND;
END
$fn$;

CREATE OR REPLACE FUNCTION mcp_alert_ack(p_destination text, p_claimant uuid, p_tenants uuid[], p_positions bigint[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    INSERT INTO mcp_alert_positions AS p (destination, tenant_id, position)
    SELECT p_destination, r.tenant_id, r.position
    FROM unnest(p_tenants, p_positions) AS r(tenant_id, position)
    ORDER BY r.tenant_id
    ON CONFLICT (destination, tenant_id) DO UPDATE
    SET position = GREATEST(p.position, EXCLUDED.position);
    UPDATE mcp_alert_cursors c
    SET claimed_by = NULL, claimed_until = NULL, updated_at = v_now
    WHERE c.destination = p_destination AND c.claimed_by = p_claimant;
END
$fn$;

-- mcp_skill_alert_states one key per statement: Citus runs no correlated
-- subquery beside a set-returning function (the keys' unnest).
CREATE OR REPLACE FUNCTION mcp_skill_alert_states(p_destination text, p_tenants uuid[], p_skills text[])
RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $fn$
#variable_conflict use_column
BEGIN
    FOR i IN 1 .. COALESCE(cardinality(p_tenants), 0) LOOP
        RETURN QUERY
        SELECT p_tenants[i], p_skills[i],
               EXISTS (SELECT 1 FROM mcp_skills s
                       WHERE s.tenant_id = p_tenants[i] AND s.name = p_skills[i] AND s.available),
               (SELECT a.since FROM mcp_skill_alerts a
                WHERE a.destination = p_destination AND a.tenant_id = p_tenants[i] AND a.skill = p_skills[i]);
    END LOOP;
END
$fn$;

-- mcp_heartbeat_healthy_tenant is mcp_heartbeat_healthy (0007) for one
-- tenant on Citus: one statement routed to the tenant's shard records the
-- heartbeats of its servers that are healthy and stay so, the common case;
-- mcpd sends the rest to mcp_heartbeat_tenant.
CREATE FUNCTION mcp_heartbeat_healthy_tenant(p_tenant uuid, p_servers uuid[], p_now timestamptz)
RETURNS TABLE (s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[],
               s_capabilities jsonb, s_status text, s_last_heartbeat timestamptz, s_registered_at timestamptz,
               s_deregistered_at timestamptz, s_trace_id text, s_remotes jsonb, s_description text, s_title text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now timestamptz := COALESCE(p_now, now());
BEGIN
    RETURN QUERY
    UPDATE mcp_servers s
    SET last_heartbeat_at = v_now
    WHERE s.tenant_id = p_tenant AND s.server_id = ANY (p_servers) AND s.status = 'healthy'
    RETURNING s.server_id, s.tenant_id, s.module_name, s.version, s.supported_protocols,
              s.capability_advertisement, s.status, s.last_heartbeat_at, s.registered_at,
              s.deregistered_at, s.trace_id::text, s.remotes, s.description, s.title;
END
$fn$;
REVOKE ALL ON FUNCTION mcp_heartbeat_healthy_tenant(uuid, uuid[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat_healthy_tenant(uuid, uuid[], timestamptz) TO cyberos_app;
