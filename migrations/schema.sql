-- mcpd's schema after migration 33 (make schema), dumped by pg_dump 15
--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: mcp_alert_ack(text, uuid, uuid[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_alert_ack(p_destination text, p_claimant uuid, p_tenants uuid[], p_positions bigint[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;

--
-- Name: mcp_alert_claim(text, uuid, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer) RETURNS TABLE(event_position bigint, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    -- The claim of every tenant: mcp_alert_claim_of's, whose filter a
    -- NULL list of tenants drops from each plan.
    RETURN QUERY SELECT * FROM mcp_alert_claim_of(p_destination, p_claimant, p_limit, NULL);
END
$$;

--
-- Name: mcp_alert_claim_of(text, uuid, integer, uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_alert_claim_of(p_destination text, p_claimant uuid, p_limit integer, p_tenants uuid[]) RETURNS TABLE(event_position bigint, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
BEGIN
    PERFORM 1 FROM mcp_alert_cursors c
    WHERE c.destination = p_destination AND c.claimed_by = p_claimant;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Oldest first across tenants, and each tenant's events in position
    -- order, so that what is delivered of a tenant is always the first of
    -- its events and the acknowledgement (the tenant's last position
    -- delivered) skips none: events are ordered by the latest time of
    -- their tenant's events up to them. A tenant's times are not always
    -- in position order (each transaction stamps its events with its own
    -- time, and takes its positions when it locks the tenant's counter),
    -- and ordering by the time alone cut a batch after a tenant's later
    -- event and before an earlier one, which the acknowledgement then
    -- passed over.
    RETURN QUERY
    SELECT e.position, e.seq, e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name,
           e.from_status, e.to_status, e.trace_id, e.occurred_at, e.body
    FROM (
        SELECT a.position, a.seq, a.event_id, a.tenant_id, a.kind, a.server_id, a.module_name,
               a.from_status, a.to_status, a.trace_id::text AS trace_id, a.occurred_at, a.body,
               max(a.occurred_at) OVER (PARTITION BY a.tenant_id ORDER BY a.position) AS tenant_time
        FROM mcp_tenant_feed f
        LEFT JOIN mcp_alert_positions p ON p.destination = p_destination AND p.tenant_id = f.tenant_id
                                       AND (p_tenants IS NULL OR p.tenant_id = ANY (p_tenants))
        CROSS JOIN LATERAL (
            SELECT a.* FROM mcp_audit_events a
            WHERE a.tenant_id = f.tenant_id AND (p_tenants IS NULL OR a.tenant_id = ANY (p_tenants))
              AND (a.kind IN ('mcp.server.unhealthy', 'mcp.server.recovered', 'mcp.server.deregistered')
                   OR (a.kind = 'mcp.server.registered' AND a.from_status = 'unhealthy'))
              AND a.position > COALESCE(p.position, 0)
            ORDER BY a.position
            LIMIT p_limit
        ) a
        WHERE (p_tenants IS NULL OR f.tenant_id = ANY (p_tenants))
          AND f.alert_position > COALESCE(p.position, 0)
    ) e
    ORDER BY e.tenant_time, e.tenant_id, e.position
    LIMIT p_limit;
END
$$;

--
-- Name: mcp_alert_lease(text, uuid, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_alert_lease(p_destination text, p_claimant uuid, p_lease interval) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;

--
-- Name: mcp_alert_pending(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_alert_pending(p_destination text) RETURNS TABLE(pending bigint, oldest timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;

--
-- Name: mcp_audit_body(uuid, text, text, text, text[], jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_audit_body(p_server_id uuid, p_module_name text, p_status text, p_version text, p_protocols text[], p_skills_affected jsonb) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT jsonb_build_object(
        'server_id', p_server_id,
        'module_name', p_module_name,
        'status', p_status,
        'version', p_version,
        'supported_protocols', to_jsonb(p_protocols),
        'skills_affected', COALESCE(p_skills_affected, '[]'::jsonb));
$$;

--
-- Name: mcp_audit_seq(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_audit_seq() RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    RETURN nextval('mcp_audit_events_seq_seq');
END
$$;

--
-- Name: mcp_cursor_key(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_cursor_key() RETURNS bytea
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    SELECT key FROM mcp_cursor_keys WHERE id = 1;
$$;

--
-- Name: mcp_deregister(uuid, uuid, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_deregister(p_tenant uuid, p_server uuid, p_now timestamp with time zone) RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb)
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := COALESCE(p_now, now());
    v_from     text;
    v_srv      mcp_servers%ROWTYPE;
    v_ev       mcp_audit_events%ROWTYPE;
    v_position bigint;
    v_taken    jsonb;
    v_seq      bigint;
    v_event_id uuid;
    v_body     jsonb;
BEGIN
    PERFORM mcp_set_tenant(p_tenant);
    -- Locked first, so that the statements below see what a sweep
    -- holding the row committed (the skills it took away).
    SELECT * INTO v_srv
    FROM mcp_servers s
    WHERE s.tenant_id = p_tenant AND s.server_id = p_server
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_from := v_srv.status;
    -- Deregistered already: returned as it is, the event's columns NULL
    -- (v_ev unset).
    IF v_from <> 'deregistered' THEN
        INSERT INTO mcp_tenant_servers AS t (tenant_id, live) VALUES (p_tenant, 0)
        ON CONFLICT (tenant_id) DO UPDATE SET live = t.live - 1;
        -- A statement of its own: Citus runs no function that writes inside
        -- another statement on a shard.
        v_position := mcp_feed_next(p_tenant, 'mcp.server.deregistered', v_from);
        UPDATE mcp_servers s
        SET status = 'deregistered', deregistered_at = v_now, status_changed_at = v_now
        WHERE s.tenant_id = p_tenant AND s.server_id = p_server
        RETURNING * INTO v_srv;
        -- Read, then updated: the server's row lock keeps them the same.
        SELECT COALESCE(jsonb_agg(k.name ORDER BY k.name COLLATE "C"), '[]'::jsonb) INTO v_taken
        FROM mcp_skills k
        WHERE k.tenant_id = p_tenant AND k.server_id = p_server
          AND (k.available OR k.unavailable_reason = 'server_unhealthy');
        UPDATE mcp_skills k
        SET available = false, unavailable_reason = 'server_deregistered'
        WHERE k.tenant_id = p_tenant AND k.server_id = p_server
          AND (k.available OR k.unavailable_reason = 'server_unhealthy');
        -- Taken apart, so that the INSERT holds no volatile call and
        -- Citus keeps its plan (mcp_audit_seq.sql).
        v_seq := mcp_audit_seq();
        v_event_id := gen_random_uuid();
        -- Computed apart too: in the INSERT, Citus would evaluate the
        -- call on each execution, parsing the function's body each time.
        v_body := mcp_audit_body(v_srv.server_id, v_srv.module_name, v_srv.status, v_srv.version,
                                 COALESCE(v_srv.supported_protocols, '{}'), v_taken);
        INSERT INTO mcp_audit_events
            (seq, event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at,
             body, position)
        OVERRIDING SYSTEM VALUE
        VALUES (v_seq, v_event_id, p_tenant, 'mcp.server.deregistered', v_srv.server_id, v_srv.module_name, v_from,
                v_srv.status, v_srv.trace_id, v_srv.deregistered_at,
                v_body, v_position)
        RETURNING * INTO v_ev;
    END IF;

    RETURN QUERY SELECT
        v_srv.server_id, v_srv.tenant_id, v_srv.module_name, v_srv.version, v_srv.supported_protocols,
        v_srv.capability_advertisement, v_srv.status, v_srv.last_heartbeat_at, v_srv.registered_at,
        v_srv.deregistered_at, v_srv.trace_id::text, v_srv.remotes, v_srv.description, v_srv.title,
        v_ev.seq, v_ev.event_id, v_ev.tenant_id, v_ev.kind, v_ev.server_id, v_ev.module_name,
        v_ev.from_status, v_ev.to_status, v_ev.trace_id::text, v_ev.occurred_at, v_ev.body;
END
$$;

--
-- Name: mcp_feed_epoch(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_feed_epoch() RETURNS bigint
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    RETURN ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
END
$$;

--
-- Name: mcp_feed_horizon(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_feed_horizon(p_tenant uuid, OUT epoch bigint, OUT pos bigint) RETURNS record
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    v_position bigint;
BEGIN
    SELECT f.position INTO v_position FROM mcp_tenant_feed f WHERE f.tenant_id = p_tenant;
    epoch := mcp_feed_epoch();
    pos := COALESCE(v_position, 0);
END
$$;

--
-- Name: mcp_feed_next(uuid, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_feed_next(p_tenant uuid, p_kind text, p_from text) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;

--
-- Name: mcp_feed_position(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_feed_position(p_tenant uuid) RETURNS bigint
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    v_position bigint;
BEGIN
    SELECT f.position INTO v_position FROM mcp_tenant_feed f WHERE f.tenant_id = p_tenant;
    RETURN COALESCE(v_position, 0);
END
$$;

--
-- Name: mcp_feed_read(uuid[], bigint[], integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_feed_read(p_tenants uuid[], p_after bigint[], p_limit integer) RETURNS TABLE(epoch bigint, feed_tenant uuid, horizon bigint, event_position bigint, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;

--
-- Name: mcp_feed_read_each(uuid[], bigint[], integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_feed_read_each(p_tenants uuid[], p_after bigint[], p_limit integer) RETURNS TABLE(epoch bigint, feed_tenant uuid, horizon bigint, event_position bigint, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_epoch bigint := mcp_feed_epoch();
    v_horizons jsonb;
    v_horizon bigint;
BEGIN
    -- Every tenant's horizon in one statement: on Citus a task on each
    -- shard that holds one of them, not a statement per tenant.
    SELECT COALESCE(jsonb_object_agg(f.tenant_id::text, f.position), '{}'::jsonb) INTO v_horizons
    FROM mcp_tenant_feed f WHERE f.tenant_id = ANY(p_tenants);
    FOR i IN 1 .. COALESCE(cardinality(p_tenants), 0) LOOP
        v_horizon := COALESCE((v_horizons ->> p_tenants[i]::text)::bigint, 0);
        IF p_after[i] >= v_horizon THEN
            -- Nothing new (a read of the horizon alone, or a tenant at
            -- rest): its row without a statement.
            epoch := v_epoch;
            feed_tenant := p_tenants[i];
            horizon := v_horizon;
            event_position := NULL; seq := NULL; event_id := NULL; tenant_id := NULL; kind := NULL;
            server_id := NULL; module_name := NULL; from_status := NULL; to_status := NULL;
            trace_id := NULL; occurred_at := NULL; body := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
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
$$;

--
-- Name: mcp_heartbeat(uuid[], uuid[], timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_heartbeat(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) RETURNS TABLE(o_tenant_id uuid, o_server_id uuid, o_prev_status text, s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb)
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
    SET last_heartbeat_at = v_now, status = 'healthy',
        status_changed_at = CASE WHEN p.status = 'healthy' THEN s.status_changed_at ELSE v_now END
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

--
-- Name: mcp_heartbeat_healthy(uuid[], uuid[], timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_heartbeat_healthy(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH upd AS (
    UPDATE mcp_servers s
    SET last_heartbeat_at = COALESCE(p_now, now())
    FROM unnest(p_tenants, p_servers) AS r(tenant_id, server_id)
    WHERE s.server_id = r.server_id AND s.tenant_id = r.tenant_id AND s.status = 'healthy'
    RETURNING s.server_id, s.tenant_id, s.module_name, s.version, s.supported_protocols,
              s.capability_advertisement, s.status, s.last_heartbeat_at, s.registered_at,
              s.deregistered_at, s.trace_id::text AS trace_id, s.remotes, s.description, s.title
)
SELECT u.server_id, u.tenant_id, u.module_name, u.version, u.supported_protocols,
       u.capability_advertisement, u.status, u.last_heartbeat_at, u.registered_at,
       u.deregistered_at, u.trace_id, u.remotes, u.description, u.title
FROM upd u;
END
$$;

--
-- Name: mcp_heartbeat_healthy_group(uuid, uuid[], uuid[], timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_heartbeat_healthy_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := COALESCE(p_now, now());
BEGIN
    -- tenant_id = ANY prunes to the tenants' shards; the join matches each
    -- server with the tenant that sent its heartbeat, and no other.
    RETURN QUERY
    UPDATE mcp_servers s
    SET last_heartbeat_at = v_now
    FROM unnest(p_tenants, p_servers) AS b(tenant_id, server_id)
    WHERE s.tenant_id = ANY (p_tenants) AND s.server_id = ANY (p_servers)
      AND s.tenant_id = b.tenant_id AND s.server_id = b.server_id AND s.status = 'healthy'
    RETURNING s.server_id, s.tenant_id, s.module_name, s.version, s.supported_protocols,
              s.capability_advertisement, s.status, s.last_heartbeat_at, s.registered_at,
              s.deregistered_at, s.trace_id::text, s.remotes, s.description, s.title;
END
$$;

--
-- Name: mcp_heartbeat_held(uuid, uuid[], bigint[], timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_heartbeat_held(p_tenant uuid, p_servers uuid[], p_ages bigint[], p_now timestamp with time zone) RETURNS TABLE(o_tenant_id uuid, o_server_id uuid, o_prev_status text, s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_now    timestamptz := COALESCE(p_now, now());
    v_at     timestamptz[];
    v_locked uuid[];
    v_rest   uuid[];
    v_gone   uuid[];
    v_busy   uuid[];
BEGIN
    -- The times here: Citus refuses a stable operator (timestamptz minus
    -- interval) on a column in an UPDATE.
    v_at := ARRAY(SELECT v_now - a * interval '1 microsecond' FROM unnest(p_ages) WITH ORDINALITY AS x(a, i) ORDER BY i);
    -- Lock the healthy servers' rows, in server_id order, skipping those
    -- another transaction holds (a registration, a sweep, a heartbeat that
    -- went to the store, anyone's): their heartbeats are named busy and
    -- written by the next flush, so that a row held for long never holds
    -- up the rest of the window, nor another tenant's.
    SELECT array_agg(l.server_id) INTO v_locked
    FROM (SELECT s.server_id FROM mcp_servers s
          WHERE s.tenant_id = p_tenant AND s.server_id = ANY (p_servers) AND s.status = 'healthy'
          ORDER BY s.server_id
          FOR UPDATE OF s SKIP LOCKED) l;
    IF v_locked IS NOT NULL THEN
        UPDATE mcp_servers s
        SET last_heartbeat_at = GREATEST(s.last_heartbeat_at, h.at)
        FROM unnest(p_servers, v_at) AS h(id, at)
        WHERE s.tenant_id = p_tenant AND s.server_id = h.id AND s.server_id = ANY (v_locked);
    END IF;
    IF COALESCE(cardinality(v_locked), 0) >= COALESCE(cardinality(p_servers), 0) THEN
        RETURN; -- the common case: every server was healthy (the caller sends each once)
    END IF;
    -- The others: not healthy (to recover), not the tenant's, or healthy
    -- and held by another transaction (busy).
    SELECT array_agg(h.id) FILTER (WHERE s.server_id IS NOT NULL AND s.status <> 'healthy'),
           array_agg(h.id) FILTER (WHERE s.server_id IS NULL),
           array_agg(h.id) FILTER (WHERE s.status = 'healthy')
    INTO v_rest, v_gone, v_busy
    FROM unnest(p_servers) AS h(id)
    LEFT JOIN unnest(v_locked) AS k(id) ON k.id = h.id
    LEFT JOIN mcp_servers s ON s.tenant_id = p_tenant AND s.server_id = h.id
    WHERE k.id IS NULL;
    IF v_rest IS NOT NULL THEN
        -- The recovery's time is taken now, after the locks above: a
        -- sweep that moved the server committed before it.
        RETURN QUERY
        SELECT * FROM mcp_heartbeat_tenant(p_tenant, v_rest, COALESCE(p_now, clock_timestamp()));
    END IF;
    -- A server that is not the tenant's: a row with no previous status; a
    -- busy one: previous status 'busy'.
    RETURN QUERY
    SELECT p_tenant, g.id, g.st,
           NULL::uuid, NULL::uuid, NULL::text, NULL::text, NULL::text[], NULL::jsonb, NULL::text,
           NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb, NULL::text,
           NULL::text, NULL::bigint, NULL::uuid, NULL::uuid, NULL::text, NULL::uuid, NULL::text, NULL::text,
           NULL::text, NULL::text, NULL::timestamptz, NULL::jsonb
    FROM (SELECT x.id, NULL::text AS st FROM unnest(v_gone) AS x(id)
          UNION ALL
          SELECT y.id, 'busy'::text FROM unnest(v_busy) AS y(id)) g;
END
$$;

--
-- Name: mcp_heartbeat_held_group(uuid, uuid[], uuid[], bigint[], timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_heartbeat_held_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_ages bigint[], p_now timestamp with time zone) RETURNS TABLE(o_tenant_id uuid, o_server_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET lock_timeout TO '50ms'
    AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := COALESCE(p_now, now());
    v_at  timestamptz[];
BEGIN
    -- The times here: Citus refuses a stable operator (timestamptz minus
    -- interval) on a column in an UPDATE.
    v_at := ARRAY(SELECT v_now - a * interval '1 microsecond' FROM unnest(p_ages) WITH ORDINALITY AS x(a, i) ORDER BY i);
    -- tenant_id = ANY prunes to the tenants' shards; the join matches each
    -- server with the tenant that sent its heartbeat, and no other.
    RETURN QUERY
    UPDATE mcp_servers s
    SET last_heartbeat_at = GREATEST(s.last_heartbeat_at, b.at)
    FROM unnest(p_tenants, p_servers, v_at) AS b(tenant_id, server_id, at)
    WHERE s.tenant_id = ANY (p_tenants) AND s.server_id = ANY (p_servers)
      AND s.tenant_id = b.tenant_id AND s.server_id = b.server_id AND s.status = 'healthy'
    RETURNING s.tenant_id, s.server_id;
END
$$;

--
-- Name: mcp_heartbeat_tenant(uuid, uuid[], timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_heartbeat_tenant(p_tenant uuid, p_servers uuid[], p_now timestamp with time zone) RETURNS TABLE(o_tenant_id uuid, o_server_id uuid, o_prev_status text, s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
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
    v_seq      bigint;
    v_event_id uuid;
    v_body     jsonb;
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
        -- Taken apart, so that the INSERT holds no volatile call and
        -- Citus keeps its plan (mcp_audit_seq.sql).
        v_seq := mcp_audit_seq();
        v_event_id := gen_random_uuid();
        -- Computed apart too: in the INSERT, Citus would evaluate the
        -- call on each execution, parsing the function's body each time.
        v_body := mcp_audit_body(v_rec[i], v_module, 'healthy', v_version, v_protocols, v_names);
        INSERT INTO mcp_audit_events
            (seq, event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
             trace_id, occurred_at, body, position)
        OVERRIDING SYSTEM VALUE
        VALUES (v_seq, v_event_id, p_tenant, 'mcp.server.recovered', v_rec[i], v_module, v_from[i], 'healthy',
                v_trace, v_now, v_body, v_first + i);
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
$$;

--
-- Name: mcp_live_counts(uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_live_counts(p_tenants uuid[]) RETURNS TABLE(tenant_id uuid, live bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.tenant_id, count(*) FROM mcp_servers s
        WHERE s.tenant_id = ANY (p_tenants) AND s.status <> 'deregistered'
        GROUP BY s.tenant_id;
END
$$;

--
-- Name: mcp_now(timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_now(p_now timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN COALESCE(p_now, now());
END
$$;

--
-- Name: mcp_register(uuid, uuid, text, text, text[], jsonb, text, jsonb, text, text, text[], text[], integer, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_register(p_tenant uuid, p_new_id uuid, p_module text, p_version text, p_protocols text[], p_capabilities jsonb, p_trace text, p_remotes jsonb, p_description text, p_title text, p_skills text[], p_skill_descriptions text[], p_quota integer, p_now timestamp with time zone) RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb, r_created boolean)
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := COALESCE(p_now, now());
    v_from    text;
    v_created boolean;
    v_live    bigint;
    v_srv     mcp_servers%ROWTYPE;
    v_ev      mcp_audit_events%ROWTYPE;
    v_position bigint;
    v_affected jsonb;
    v_skill_id uuid;
    v_seq      bigint;
    v_event_id uuid;
    v_body     jsonb;
BEGIN
    PERFORM mcp_set_tenant(p_tenant);
    -- A new module: its row. A registration of the module that commits
    -- meanwhile makes this one wait, then find its row below.
    INSERT INTO mcp_servers AS s (server_id, tenant_id, module_name, version, supported_protocols,
                                  capability_advertisement, status, last_heartbeat_at, registered_at,
                                  trace_id, remotes, description, title, status_changed_at)
    VALUES (p_new_id, p_tenant, p_module, p_version, p_protocols, p_capabilities, 'healthy', v_now, v_now,
            p_trace, p_remotes, p_description, p_title, v_now)
    ON CONFLICT (tenant_id, module_name) DO NOTHING
    RETURNING * INTO v_srv;
    v_created := FOUND;
    IF NOT v_created THEN
        -- A module registered before (rows of mcp_servers are never
        -- deleted): update its row, locked.
        SELECT s.status INTO v_from
        FROM mcp_servers s
        WHERE s.tenant_id = p_tenant AND s.module_name = p_module
        FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'module % of tenant %: conflicting row gone', p_module, p_tenant
                USING ERRCODE = 'serialization_failure';
        END IF;
        UPDATE mcp_servers s
        SET version = p_version, supported_protocols = p_protocols, capability_advertisement = p_capabilities,
            status = 'healthy', last_heartbeat_at = v_now, deregistered_at = NULL, remotes = p_remotes,
            description = p_description, title = p_title, status_changed_at = v_now
        WHERE s.tenant_id = p_tenant AND s.module_name = p_module
        RETURNING * INTO v_srv;
    END IF;

    -- A server that is live again (new, or registered after its
    -- deregistration) counts for the tenant's quota, under the lock of the
    -- tenant's row of mcp_tenant_servers, so that the tenant's
    -- registrations count one at a time; past the quota the whole call
    -- rolls back. A re-registration of a live server is always allowed.
    IF v_created OR v_from = 'deregistered' THEN
        INSERT INTO mcp_tenant_servers AS t (tenant_id, live) VALUES (p_tenant, 1)
        ON CONFLICT (tenant_id) DO UPDATE SET live = t.live + 1
        RETURNING t.live INTO v_live;
        IF p_quota > 0 AND v_live > p_quota THEN
            RAISE EXCEPTION 'tenant quota of % servers reached', p_quota USING ERRCODE = 'MCQ01';
        END IF;
    END IF;

    -- A new server has no skills to drop.
    IF NOT v_created THEN
        DELETE FROM mcp_skills k
        WHERE k.tenant_id = p_tenant AND k.server_id = v_srv.server_id AND NOT (k.name = ANY (p_skills));
    END IF;
    -- A skill the server has already takes the new description, and is
    -- available again when its server's unhealthy or deregistered state
    -- took it away. A static INSERT for each skill, whose plan the session
    -- keeps (on Citus the shard's plan too: its id is a variable, not a
    -- volatile call in the statement, which Citus would not cache); a
    -- name given twice (the API refuses it) updates the first. For 256
    -- skills as fast as one INSERT ... VALUES built for them and run by
    -- EXECUTE on plain PostgreSQL (9-10 ms), and faster on Citus (20 ms
    -- against 36-40 ms), 2026-12-06.
    FOR i IN 1 .. COALESCE(cardinality(p_skills), 0) LOOP
        v_skill_id := gen_random_uuid();
        INSERT INTO mcp_skills AS k (skill_id, tenant_id, server_id, name, description)
        VALUES (v_skill_id, p_tenant, v_srv.server_id, p_skills[i], p_skill_descriptions[i])
        ON CONFLICT (tenant_id, server_id, name) DO UPDATE
        SET description = EXCLUDED.description,
            available = k.available OR k.unavailable_reason IN ('server_unhealthy', 'server_deregistered'),
            unavailable_reason = CASE WHEN k.unavailable_reason IN ('server_unhealthy', 'server_deregistered')
                                      THEN NULL ELSE k.unavailable_reason END;
    END LOOP;

    -- A statement of its own: Citus runs no function that writes inside
    -- another statement on a shard.
    v_position := mcp_feed_next(p_tenant, 'mcp.server.registered', v_from);
    -- Computed apart: Citus takes no subquery inside an INSERT.
    v_affected := to_jsonb(ARRAY(SELECT n FROM unnest(p_skills) AS n ORDER BY n COLLATE "C"));
    -- Taken apart, so that the INSERT holds no volatile call and Citus
    -- keeps its plan (mcp_audit_seq.sql).
    v_seq := mcp_audit_seq();
    v_event_id := gen_random_uuid();
    -- Computed apart: in the INSERT, Citus would evaluate the call on
    -- each execution, parsing the function's body each time.
    v_body := mcp_audit_body(v_srv.server_id, v_srv.module_name, v_srv.status, v_srv.version,
                             v_srv.supported_protocols, v_affected);
    INSERT INTO mcp_audit_events
        (seq, event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at,
         body, position)
    OVERRIDING SYSTEM VALUE
    VALUES (v_seq, v_event_id, p_tenant, 'mcp.server.registered', v_srv.server_id, v_srv.module_name, v_from,
            v_srv.status, v_srv.trace_id, v_srv.last_heartbeat_at,
            v_body, v_position)
    RETURNING * INTO v_ev;

    RETURN QUERY SELECT
        v_srv.server_id, v_srv.tenant_id, v_srv.module_name, v_srv.version, v_srv.supported_protocols,
        v_srv.capability_advertisement, v_srv.status, v_srv.last_heartbeat_at, v_srv.registered_at,
        v_srv.deregistered_at, v_srv.trace_id::text, v_srv.remotes, v_srv.description, v_srv.title,
        v_ev.seq, v_ev.event_id, v_ev.tenant_id, v_ev.kind, v_ev.server_id, v_ev.module_name,
        v_ev.from_status, v_ev.to_status, v_ev.trace_id::text, v_ev.occurred_at, v_ev.body, v_created;
END
$$;

--
-- Name: mcp_register_group(uuid, uuid[], uuid[], jsonb, integer[], timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_register_group(p_tenant uuid, p_tenants uuid[], p_new_ids uuid[], p_registrations jsonb, p_quotas integer[], p_now timestamp with time zone) RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb, r_created boolean, r_index integer)
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_reg jsonb;
BEGIN
    FOR i IN 1 .. COALESCE(cardinality(p_tenants), 0) LOOP
        v_reg := p_registrations -> (i - 1);
        BEGIN
            RETURN QUERY
            SELECT r.*, i
            FROM mcp_register(p_tenants[i], p_new_ids[i], v_reg->>'module_name', v_reg->>'version',
                              ARRAY(SELECT e FROM jsonb_array_elements_text(v_reg->'protocols') WITH ORDINALITY AS a(e, n) ORDER BY n),
                              v_reg->'capabilities', v_reg->>'trace_id', v_reg->'remotes',
                              v_reg->>'description', v_reg->>'title',
                              ARRAY(SELECT e FROM jsonb_array_elements_text(v_reg->'skills') WITH ORDINALITY AS a(e, n) ORDER BY n),
                              ARRAY(SELECT e FROM jsonb_array_elements_text(v_reg->'skill_descriptions') WITH ORDINALITY AS a(e, n) ORDER BY n),
                              p_quotas[i], p_now) AS r;
        EXCEPTION WHEN SQLSTATE 'MCQ01' THEN
            -- The output columns are never set: all null but the index.
            r_index := i;
            RETURN NEXT;
        END;
    END LOOP;
END
$$;

--
-- Name: mcp_set_tenant(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_set_tenant(p_tenant uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    SET LOCAL citus.propagate_set_commands TO 'local';
    EXECUTE format('SET LOCAL auth.tenant_id TO %L', p_tenant::text);
END
$$;

--
-- Name: mcp_skill_alert_states(text, uuid[], text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_skill_alert_states(p_destination text, p_tenants uuid[], p_skills text[]) RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;

--
-- Name: mcp_skill_alerts_firing(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_skill_alerts_firing(p_destination text) RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    RETURN QUERY SELECT * FROM mcp_skill_alerts_firing_of(p_destination, NULL);
END
$$;

--
-- Name: mcp_skill_alerts_firing_of(text, uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_skill_alerts_firing_of(p_destination text, p_tenants uuid[]) RETURNS TABLE(tenant_id uuid, skill text, available boolean, firing_since timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT a.tenant_id, a.skill,
               EXISTS (SELECT 1 FROM mcp_skills s WHERE s.tenant_id = a.tenant_id AND (p_tenants IS NULL OR s.tenant_id = ANY (p_tenants)) AND s.name = a.skill AND s.available),
               a.since
        FROM mcp_skill_alerts a
        WHERE (p_tenants IS NULL OR a.tenant_id = ANY (p_tenants)) AND a.destination = p_destination
        ORDER BY a.tenant_id, a.skill;
END
$$;

--
-- Name: mcp_skill_alerts_record(text, uuid[], text[], timestamp with time zone[], uuid[], text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_skill_alerts_record(p_destination text, p_tenants uuid[], p_skills text[], p_since timestamp with time zone[], p_resolved_tenants uuid[], p_resolved_skills text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
BEGIN
    INSERT INTO mcp_skill_alerts (destination, tenant_id, skill, since)
        SELECT p_destination, r.tenant_id, r.skill, r.since
        FROM unnest(p_tenants, p_skills, p_since) AS r(tenant_id, skill, since)
        ON CONFLICT (destination, tenant_id, skill) DO NOTHING;
    -- The resolved tenants' shards alone (the filter on the distribution
    -- column, a constant in each custom plan): on Citus, without it the
    -- DELETE ran on every shard, and failed while any worker was down.
    IF COALESCE(cardinality(p_resolved_tenants), 0) > 0 THEN
        DELETE FROM mcp_skill_alerts a
        USING unnest(p_resolved_tenants, p_resolved_skills) AS r(tenant_id, skill)
        WHERE a.destination = p_destination AND a.tenant_id = ANY (p_resolved_tenants)
          AND a.tenant_id = r.tenant_id AND a.skill = r.skill;
    END IF;
END
$$;

--
-- Name: mcp_status_counts(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_status_counts() RETURNS TABLE(status text, servers bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    SELECT s.status, count(*) FROM mcp_servers s GROUP BY s.status;
$$;

--
-- Name: mcp_sweep(timestamp with time zone, interval, interval, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer) RETURNS TABLE(event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
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
                      THEN 'unhealthy' ELSE 'degraded' END,
        status_changed_at = v_now
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

--
-- Name: mcp_sweep_due(timestamp with time zone, interval, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_due(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval) RETURNS TABLE(tenant_id uuid)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_now              timestamptz := COALESCE(p_now, now());
    v_degraded_before  timestamptz := v_now - p_degraded_after;
    v_unhealthy_before timestamptz := v_now - p_unhealthy_after;
BEGIN
    RETURN QUERY
    SELECT DISTINCT s.tenant_id
    FROM mcp_servers s
    WHERE s.status IN ('healthy', 'degraded')
      AND ((s.status = 'healthy' AND s.last_heartbeat_at <= v_degraded_before)
           OR (s.status = 'degraded' AND s.last_heartbeat_at <= v_unhealthy_before));
END
$$;

--
-- Name: mcp_sweep_due_of(uuid[], timestamp with time zone, interval, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_due_of(p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval) RETURNS TABLE(tenant_id uuid)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_now              timestamptz := COALESCE(p_now, now());
    v_degraded_before  timestamptz := v_now - p_degraded_after;
    v_unhealthy_before timestamptz := v_now - p_unhealthy_after;
BEGIN
    RETURN QUERY
    SELECT DISTINCT s.tenant_id
    FROM mcp_servers s
    WHERE s.tenant_id = ANY (p_tenants)
      AND s.status IN ('healthy', 'degraded')
      AND ((s.status = 'healthy' AND s.last_heartbeat_at <= v_degraded_before)
           OR (s.status = 'degraded' AND s.last_heartbeat_at <= v_unhealthy_before));
END
$$;

--
-- Name: mcp_sweep_group(uuid, uuid[], timestamp with time zone, interval, interval, integer, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval) RETURNS TABLE(event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET lock_timeout TO '50ms'
    AS $$
#variable_conflict use_column
DECLARE
    v_now              timestamptz := COALESCE(p_now, now());
    v_degraded_before  timestamptz := v_now - p_degraded_after;
    v_unhealthy_before timestamptz := v_now - p_unhealthy_after;
    v_stale            timestamptz := v_now - p_blind_after;
    v_group uuid[];  -- the tenants of one shard
    -- Tenants in their blind window's wake: no server of theirs degrades
    -- (v_no_degraded) or becomes unhealthy (v_no_unhealthy).
    v_no_degraded  uuid[];
    v_no_unhealthy uuid[];
    -- The servers due, as read, in the order of (tenant_id, server_id).
    v_due_ids  uuid[];
    v_due_from text[];
    v_due_to   text[];
    v_cut      uuid;  -- the tenant of the first server due past the limit
    v_locked   uuid[];  -- the shard's tenants whose rows the call holds
    v_marked   uuid[];
    v_opened   uuid[];  -- those whose blind window opens now
    v_until    timestamptz;
    v_to_unhealthy uuid[];
    v_from_healthy uuid[];
    -- The servers moved; once sorted, in the order of (tenant_id,
    -- server_id), as their events.
    v_ten  uuid[];
    v_ids  uuid[];
    v_to   text[];
    v_mod  text[];
    v_trc  text[];
    v_ver  text[];
    v_prt  jsonb[];
    v_from   text[];
    v_pos    bigint[];
    v_names  jsonb[];
    v_eids   uuid[];
    v_bodies jsonb[];
    -- Each tenant with transitions: how many, the rank of its last
    -- unhealthy one (0: none), and its feed position after them.
    v_ft   uuid[];
    v_fn   bigint[];
    v_fa   bigint[];
    v_last bigint[];
    -- The skills of the servers that became unhealthy, by server.
    v_skill_ids   uuid[];
    v_skill_names jsonb[];
    -- What the call returns: the events, and the tenants swept whole.
    o_eids   uuid[] := '{}';
    o_ten    uuid[] := '{}';
    o_ids    uuid[] := '{}';
    o_mod    text[] := '{}';
    o_from   text[] := '{}';
    o_to     text[] := '{}';
    o_trc    text[] := '{}';
    o_bodies jsonb[] := '{}';
    o_done   uuid[] := '{}';
    r record;
    v_together boolean := false;
    -- One tenant after another (a row held).
    v_left   integer := p_limit;
    v_tenant uuid;
    v_before bigint;
    v_n      integer;
BEGIN
    IF COALESCE(cardinality(p_tenants), 0) = 0 THEN
        RETURN;
    END IF;
    BEGIN
        -- A shard's tenants at a time: each statement then runs on one
        -- shard, planned with that shard's tenants. A statement naming
        -- every tenant of the call ran on each of the worker's shards,
        -- planned there with all of them: 0.9 s for 512 transitions among
        -- 1,500 tenants (its events read back from the table, too),
        -- against 0.23 s a shard at a time (2026-12-06).
        FOR v_group IN
            SELECT array_agg(g.t ORDER BY g.t)
            FROM unnest(p_tenants) AS g(t)
            GROUP BY get_shard_id_for_distribution_column('mcp_servers', g.t)
            ORDER BY 1
        LOOP
            EXIT WHEN v_left <= 0;
            v_cut := NULL;
            v_no_degraded := '{}';
            v_no_unhealthy := '{}';
            v_due_ids := '{}';
            v_due_from := '{}';
            v_due_to := '{}';
            v_ten := '{}';
            v_ids := '{}';
            v_to := '{}';
            v_mod := '{}';
            v_trc := '{}';
            v_ver := '{}';
            v_prt := '{}';
            v_skill_ids := '{}';
            v_skill_names := '{}';
            -- The shard's tenants whose rows no other transaction holds,
            -- locked; the others are left, to be swept alone.
            v_locked := '{}';
            FOR r IN
                SELECT f.tenant_id FROM mcp_tenant_feed f WHERE f.tenant_id = ANY (v_group)
                FOR UPDATE SKIP LOCKED
            LOOP
                v_locked := v_locked || r.tenant_id;
            END LOOP;
            CONTINUE WHEN cardinality(v_locked) = 0;
            IF p_blind_after IS NOT NULL AND p_blind_after > interval '0' THEN
                -- Each marked swept as mcp_sweep_tenant marks it: one not
                -- swept for longer than p_blind_after opens its own blind
                -- window now, and its servers wait for its wake.
                v_marked := '{}';
                v_opened := '{}';
                FOR r IN
                    SELECT t.tenant_id, t.last_sweep_at, t.blind_until FROM mcp_tenant_servers t
                    WHERE t.tenant_id = ANY (v_locked)
                    FOR UPDATE SKIP LOCKED
                LOOP
                    v_marked := v_marked || r.tenant_id;
                    v_until := r.blind_until;
                    IF r.last_sweep_at IS NOT NULL AND r.last_sweep_at < v_stale THEN
                        v_until := v_now;
                        v_opened := v_opened || r.tenant_id;
                    END IF;
                    IF v_until > v_unhealthy_before THEN
                        v_no_unhealthy := v_no_unhealthy || r.tenant_id;
                    END IF;
                    IF v_until > v_degraded_before THEN
                        v_no_degraded := v_no_degraded || r.tenant_id;
                    END IF;
                END LOOP;
                v_locked := v_marked;
                CONTINUE WHEN cardinality(v_locked) = 0;
                UPDATE mcp_tenant_servers t
                SET blind_until = CASE WHEN t.tenant_id = ANY (v_opened) THEN v_now ELSE t.blind_until END,
                    last_sweep_at = GREATEST(v_now, COALESCE(t.last_sweep_at, v_now))
                WHERE t.tenant_id = ANY (v_locked);
            END IF;

            -- The servers due, locked; one that another transaction holds
            -- (a heartbeat) is not due now.
            FOR r IN
                SELECT s.tenant_id, s.server_id, s.status,
                       CASE WHEN s.last_heartbeat_at <= v_unhealthy_before AND s.tenant_id <> ALL (v_no_unhealthy)
                            THEN 'unhealthy' ELSE 'degraded' END AS to_status
                FROM mcp_servers s
                WHERE s.tenant_id = ANY (v_locked)
                  AND ((s.status = 'healthy' AND s.last_heartbeat_at <= v_degraded_before
                        AND s.tenant_id <> ALL (v_no_degraded))
                       OR (s.status = 'degraded' AND s.last_heartbeat_at <= v_unhealthy_before
                           AND s.tenant_id <> ALL (v_no_unhealthy)))
                ORDER BY s.tenant_id, s.server_id
                LIMIT v_left + 1
                FOR UPDATE OF s SKIP LOCKED
            LOOP
                IF cardinality(v_due_ids) >= v_left THEN
                    v_cut := r.tenant_id;
                    EXIT;
                END IF;
                v_due_ids := v_due_ids || r.server_id;
                v_due_from := v_due_from || r.status;
                v_due_to := v_due_to || r.to_status;
            END LOOP;
            o_done := o_done || ARRAY(SELECT g FROM unnest(v_locked) AS g WHERE v_cut IS NULL OR g < v_cut);

            IF cardinality(v_due_ids) > 0 THEN
                v_to_unhealthy := ARRAY(SELECT v_due_ids[k] FROM generate_subscripts(v_due_ids, 1) k WHERE v_due_to[k] = 'unhealthy');
                v_from_healthy := ARRAY(SELECT v_due_ids[k] FROM generate_subscripts(v_due_ids, 1) k WHERE v_due_from[k] = 'healthy');
                -- Each server as it was read and locked.
                FOR r IN
                    UPDATE mcp_servers s
                    SET status = CASE WHEN s.server_id = ANY (v_to_unhealthy) THEN 'unhealthy' ELSE 'degraded' END,
                        status_changed_at = v_now
                    WHERE s.tenant_id = ANY (v_locked) AND s.server_id = ANY (v_due_ids)
                      AND s.status = CASE WHEN s.server_id = ANY (v_from_healthy) THEN 'healthy' ELSE 'degraded' END
                      AND s.last_heartbeat_at <= CASE WHEN s.server_id = ANY (v_to_unhealthy)
                                                      THEN v_unhealthy_before ELSE v_degraded_before END
                    RETURNING s.tenant_id, s.server_id, s.status, s.module_name, s.trace_id::text AS trace_id,
                              s.version, s.supported_protocols
                LOOP
                    v_ten := v_ten || r.tenant_id;
                    v_ids := v_ids || r.server_id;
                    v_to := v_to || r.status;
                    v_mod := v_mod || r.module_name;
                    v_trc := v_trc || r.trace_id;
                    v_ver := v_ver || r.version;
                    v_prt := v_prt || to_jsonb(r.supported_protocols);
                END LOOP;
            END IF;
            CONTINUE WHEN cardinality(v_ids) = 0;
            v_left := v_left - cardinality(v_ids);

            SELECT array_agg(m.t ORDER BY m.t, m.id), array_agg(m.id ORDER BY m.t, m.id),
                   array_agg(m.st ORDER BY m.t, m.id), array_agg(m.md ORDER BY m.t, m.id),
                   array_agg(m.tr ORDER BY m.t, m.id), array_agg(m.vr ORDER BY m.t, m.id),
                   array_agg(m.pr ORDER BY m.t, m.id)
            INTO v_ten, v_ids, v_to, v_mod, v_trc, v_ver, v_prt
            FROM unnest(v_ten, v_ids, v_to, v_mod, v_trc, v_ver, v_prt) AS m(t, id, st, md, tr, vr, pr);
            SELECT array_agg(g.t ORDER BY g.t), array_agg(g.n ORDER BY g.t), array_agg(g.a ORDER BY g.t)
            INTO v_ft, v_fn, v_fa
            FROM (SELECT m.t, count(*) AS n, COALESCE(max(m.rank) FILTER (WHERE m.st = 'unhealthy'), 0) AS a
                  FROM (SELECT x.t, x.st, row_number() OVER (PARTITION BY x.t ORDER BY x.k) AS rank
                        FROM unnest(v_ten, v_to) WITH ORDINALITY AS x(t, st, k)) m
                  GROUP BY m.t) g;
            -- Each tenant's position moves by its transitions, its alert
            -- position to its last unhealthy one.
            v_last := array_fill(0::bigint, ARRAY[cardinality(v_ft)]);
            FOR r IN
                UPDATE mcp_tenant_feed f
                SET position = f.position + v_fn[array_position(v_ft, f.tenant_id)],
                    alert_position = CASE WHEN v_fa[array_position(v_ft, f.tenant_id)] > 0
                                          THEN f.position + v_fa[array_position(v_ft, f.tenant_id)]
                                          ELSE f.alert_position END
                WHERE f.tenant_id = ANY (v_ft)
                RETURNING f.tenant_id, f.position
            LOOP
                v_last[array_position(v_ft, r.tenant_id)] := r.position;
            END LOOP;
            IF 0 = ANY (v_last) THEN
                RAISE EXCEPTION 'sweep: a tenant with servers has no feed position' USING ERRCODE = 'data_exception';
            END IF;
            SELECT array_agg(v_last[p.g] - v_fn[p.g] + p.rank ORDER BY p.k)
            INTO v_pos
            FROM (SELECT x.k, array_position(v_ft, x.t) AS g,
                         row_number() OVER (PARTITION BY x.t ORDER BY x.k) AS rank
                  FROM unnest(v_ten) WITH ORDINALITY AS x(t, k)) p;

            -- An unhealthy server's skills: their names for its event, then
            -- unavailable.
            IF 'unhealthy' = ANY (v_to) THEN
                v_to_unhealthy := ARRAY(SELECT v_ids[k] FROM generate_subscripts(v_ids, 1) k WHERE v_to[k] = 'unhealthy');
                FOR r IN
                    SELECT x.tenant_id, x.server_id, jsonb_agg(x.name ORDER BY x.name) AS names
                    FROM mcp_skills x
                    WHERE x.tenant_id = ANY (v_ft) AND x.server_id = ANY (v_to_unhealthy) AND x.available
                    GROUP BY x.tenant_id, x.server_id
                LOOP
                    v_skill_ids := v_skill_ids || r.server_id;
                    v_skill_names := v_skill_names || r.names;
                END LOOP;
                IF cardinality(v_skill_ids) > 0 THEN
                    UPDATE mcp_skills x
                    SET available = false, unavailable_reason = 'server_unhealthy'
                    WHERE x.tenant_id = ANY (v_ft) AND x.server_id = ANY (v_skill_ids) AND x.available;
                END IF;
            END IF;
            SELECT array_agg(CASE WHEN v_to[k] = 'degraded' OR v_ids[k] = ANY (v_from_healthy)
                                  THEN 'healthy' ELSE 'degraded' END ORDER BY k),
                   array_agg(gen_random_uuid() ORDER BY k),
                   array_agg(mcp_audit_body(v_ids[k], v_mod[k], v_to[k], v_ver[k],
                                            ARRAY(SELECT e FROM jsonb_array_elements_text(v_prt[k])
                                                  WITH ORDINALITY AS a(e, n) ORDER BY n),
                                            CASE WHEN v_to[k] = 'unhealthy'
                                                 THEN v_skill_names[array_position(v_skill_ids, v_ids[k])] END)
                             ORDER BY k)
            INTO v_from, v_eids, v_bodies
            FROM generate_subscripts(v_ids, 1) k;

            INSERT INTO mcp_audit_events
                (event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
                 trace_id, occurred_at, body, position)
            SELECT e.id, e.t, 'mcp.server.' || e.st, e.sid, e.md, e.fr, e.st, e.tr, v_now, e.body, e.pos
            FROM unnest(v_eids, v_ten, v_ids, v_mod, v_from, v_to, v_trc, v_bodies, v_pos)
                 AS e(id, t, sid, md, fr, st, tr, body, pos);
            o_eids := o_eids || v_eids;
            o_ten := o_ten || v_ten;
            o_ids := o_ids || v_ids;
            o_mod := o_mod || v_mod;
            o_from := o_from || v_from;
            o_to := o_to || v_to;
            o_trc := o_trc || v_trc;
            o_bodies := o_bodies || v_bodies;
        END LOOP;
        v_together := true;
    EXCEPTION WHEN lock_not_available THEN
        -- Undone: its moves give their share of the limit back.
        v_together := false;
        v_left := p_limit;
    END;

    IF v_together THEN
        -- Returned once the subtransaction committed.
        RETURN QUERY
        SELECT e.id, e.t, 'mcp.server.' || e.st, e.sid, e.md, e.fr, e.st, e.tr, v_now, e.body
        FROM unnest(o_eids, o_ten, o_ids, o_mod, o_from, o_to, o_trc, o_bodies)
             AS e(id, t, sid, md, fr, st, tr, body)
        ORDER BY e.t, e.sid;
        RETURN QUERY
        SELECT NULL::uuid, t, NULL::text, NULL::uuid, NULL::text, NULL::text,
               NULL::text, NULL::text, NULL::timestamptz, NULL::jsonb
        FROM unnest(p_tenants) AS t
        WHERE t <> ALL (o_done);
        RETURN;
    END IF;

    FOREACH v_tenant IN ARRAY p_tenants LOOP
        v_n := NULL;
        IF v_left > 0 THEN
            BEGIN
                PERFORM 1 FROM mcp_tenant_servers t WHERE t.tenant_id = v_tenant FOR UPDATE NOWAIT;
                SELECT f.position INTO v_before FROM mcp_tenant_feed f WHERE f.tenant_id = v_tenant FOR UPDATE NOWAIT;
                SELECT count(*) INTO v_n
                FROM mcp_sweep_tenant(v_tenant, p_now, p_degraded_after, p_unhealthy_after, v_left, p_blind_after);
            EXCEPTION WHEN lock_not_available THEN
                v_n := NULL;
            END;
        END IF;
        IF v_n > 0 THEN
            -- Read once the tenant's subtransaction committed: rows
            -- returned from inside it would stay if it rolled back.
            RETURN QUERY
            SELECT e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
                   e.to_status, e.trace_id::text, e.occurred_at, e.body
            FROM mcp_audit_events e
            WHERE e.tenant_id = v_tenant AND e.position > v_before AND e.position <= v_before + v_n
            ORDER BY e.position;
            v_left := v_left - v_n;
        END IF;
        IF v_n IS NULL OR v_left <= 0 THEN
            RETURN QUERY SELECT NULL::uuid, v_tenant, NULL::text, NULL::uuid, NULL::text, NULL::text,
                                NULL::text, NULL::text, NULL::timestamptz, NULL::jsonb;
        END IF;
    END LOOP;
END
$$;

--
-- Name: mcp_sweep_guard(timestamp with time zone, interval, interval, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_guard(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_blind_after interval) RETURNS TABLE(proceed boolean, degraded_after interval, unhealthy_after interval, blind_from timestamp with time zone, blind_until timestamp with time zone, blind_new boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
$$;

--
-- Name: mcp_sweep_guarded(timestamp with time zone, interval, interval, integer, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_guarded(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval) RETURNS TABLE(event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb, blind_from timestamp with time zone, blind_until timestamp with time zone, blind_new boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := COALESCE(p_now, now());
    v_last    timestamptz;
    v_from    timestamptz;
    v_until   timestamptz;
    v_new     boolean := false;
    v_never   constant interval := interval '1000 years';
    v_deg     interval := p_degraded_after;
    v_unh     interval := p_unhealthy_after;
BEGIN
    SELECT st.last_sweep_at, st.blind_from, st.blind_until INTO v_last, v_from, v_until
    FROM mcp_monitor_state st WHERE st.id
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN; -- another replica is sweeping now
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
        blind_windows = st.blind_windows + CASE WHEN v_new THEN 1 ELSE 0 END
    WHERE st.id;
    -- GREATEST(last_heartbeat_at, blind_until) <= now - lag holds only when
    -- blind_until does too: until then nothing of that kind is due.
    IF v_until IS NOT NULL AND v_until > v_now - p_degraded_after THEN
        v_deg := v_never;
    END IF;
    IF v_until IS NOT NULL AND v_until > v_now - p_unhealthy_after THEN
        v_unh := v_never;
    END IF;
    RETURN QUERY
    SELECT sw.event_id, sw.tenant_id, sw.kind, sw.server_id, sw.module_name, sw.from_status, sw.to_status,
           sw.trace_id, sw.occurred_at, sw.body, v_from, v_until, v_new
    FROM mcp_sweep(v_now, v_deg, v_unh, p_limit) sw;
    IF v_new AND NOT FOUND THEN
        RETURN QUERY SELECT NULL::uuid, NULL::uuid, NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text,
            NULL::text, NULL::timestamptz, NULL::jsonb, v_from, v_until, v_new;
    END IF;
END
$$;

--
-- Name: mcp_sweep_mark_group(uuid, uuid[], timestamp with time zone, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_mark_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_blind_after interval) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET lock_timeout TO '50ms'
    AS $$
#variable_conflict use_column
DECLARE
    v_now   timestamptz := COALESCE(p_now, now());
    -- Computed here: Citus refuses a stable operator (timestamptz minus
    -- interval) on a column in an UPDATE.
    v_stale timestamptz := v_now - p_blind_after;
    v_group uuid[];
BEGIN
    -- A shard's tenants at a time: a statement naming every tenant of the
    -- call ran on each of the worker's shards with all of them, planned
    -- for each (6,000 tenants of a worker: 0.68 s).
    FOR v_group IN
        SELECT array_agg(g.t)
        FROM unnest(p_tenants) AS g(t)
        GROUP BY get_shard_id_for_distribution_column('mcp_tenant_servers', g.t)
    LOOP
        UPDATE mcp_tenant_servers t
        SET blind_until = CASE WHEN t.last_sweep_at IS NOT NULL AND t.last_sweep_at < v_stale
                               THEN v_now ELSE t.blind_until END,
            last_sweep_at = GREATEST(v_now, COALESCE(t.last_sweep_at, v_now))
        WHERE t.tenant_id = ANY (v_group);
    END LOOP;
END
$$;

--
-- Name: mcp_sweep_tenant(uuid, timestamp with time zone, interval, interval, integer, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_tenant(p_tenant uuid, p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval) RETURNS TABLE(event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
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
    v_seq      bigint;
    v_event_id uuid;
    v_body     jsonb;
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
        -- Taken apart, so that the INSERT holds no volatile call and
        -- Citus keeps its plan (mcp_audit_seq.sql).
        v_seq := mcp_audit_seq();
        v_event_id := gen_random_uuid();
        -- Computed apart too: in the INSERT, Citus would evaluate the
        -- call on each execution, parsing the function's body each time.
        v_body := mcp_audit_body(v_ids[k], v_module, v_to[k], v_version, v_protocols, v_names);
        INSERT INTO mcp_audit_events
            (seq, event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
             trace_id, occurred_at, body, position)
        OVERRIDING SYSTEM VALUE
        VALUES (v_seq, v_event_id, p_tenant, 'mcp.server.' || v_to[k], v_ids[k], v_module, v_from[k], v_to[k],
                v_trace, v_now, v_body, v_pos[k]);
    END LOOP;
    RETURN QUERY
    SELECT e.event_id, e.tenant_id, e.kind, e.server_id, e.module_name, e.from_status,
           e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM mcp_audit_events e
    WHERE e.tenant_id = p_tenant AND e.position > v_last - v_n AND e.position <= v_last
    ORDER BY e.position;
END
$$;

--
-- Name: mcp_sweep_tenants(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_tenants() RETURNS TABLE(tenant_id uuid)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    RETURN QUERY SELECT t.tenant_id FROM mcp_tenant_servers t WHERE t.live > 0 ORDER BY t.tenant_id;
END
$$;

--
-- Name: mcp_sweep_tenants_save(uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_tenants_save(p_tenants uuid[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    -- Saves of several replicas one at a time: a DELETE and an INSERT of
    -- two at once could mix their lists, or deadlock.
    LOCK TABLE mcp_sweep_tenant_list IN EXCLUSIVE MODE;
    DELETE FROM mcp_sweep_tenant_list l
    WHERE NOT EXISTS (SELECT 1 FROM unnest(p_tenants) AS t WHERE t = l.tenant_id);
    INSERT INTO mcp_sweep_tenant_list (tenant_id)
    SELECT t FROM unnest(p_tenants) AS t
    ON CONFLICT (tenant_id) DO NOTHING;
END
$$;

--
-- Name: mcp_sweep_tenants_saved(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_sweep_tenants_saved() RETURNS TABLE(tenant_id uuid)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY SELECT l.tenant_id FROM mcp_sweep_tenant_list l ORDER BY l.tenant_id;
END
$$;

--
-- Name: mcp_unhealthy_servers(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_unhealthy_servers() RETURNS TABLE(server_id uuid, tenant_id uuid, module_name text, version text, last_heartbeat_at timestamp with time zone, trace_id text, unhealthy_since timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    RETURN QUERY SELECT * FROM mcp_unhealthy_servers_of(NULL);
END
$$;

--
-- Name: mcp_unhealthy_servers_of(uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.mcp_unhealthy_servers_of(p_tenants uuid[]) RETURNS TABLE(server_id uuid, tenant_id uuid, module_name text, version text, last_heartbeat_at timestamp with time zone, trace_id text, unhealthy_since timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.server_id, s.tenant_id, s.module_name, s.version, s.last_heartbeat_at, s.trace_id::text,
               (SELECT max(e.occurred_at) FROM mcp_audit_events e
                 WHERE e.tenant_id = s.tenant_id AND (p_tenants IS NULL OR e.tenant_id = ANY (p_tenants)) AND e.server_id = s.server_id AND e.kind = 'mcp.server.unhealthy')
        FROM mcp_servers s
        WHERE (p_tenants IS NULL OR s.tenant_id = ANY (p_tenants)) AND s.status = 'unhealthy';
END
$$;

SET default_table_access_method = heap;

--
-- Name: mcp_alert_cursors; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_alert_cursors (
    destination text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_by uuid,
    claimed_until timestamp with time zone
);

--
-- Name: mcp_alert_positions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_alert_positions (
    destination text NOT NULL,
    tenant_id uuid NOT NULL,
    "position" bigint NOT NULL,
    CONSTRAINT mcp_alert_positions_position_check CHECK (("position" >= 0))
);

--
-- Name: mcp_audit_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_audit_events (
    seq bigint NOT NULL,
    event_id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    kind text NOT NULL,
    server_id uuid NOT NULL,
    module_name text NOT NULL,
    from_status text,
    to_status text NOT NULL,
    trace_id character(32),
    occurred_at timestamp with time zone NOT NULL,
    body jsonb NOT NULL,
    "position" bigint NOT NULL,
    CONSTRAINT mcp_audit_events_from_status_check CHECK ((from_status = ANY (ARRAY['healthy'::text, 'degraded'::text, 'unhealthy'::text, 'deregistered'::text]))),
    CONSTRAINT mcp_audit_events_kind_check CHECK ((kind = ANY (ARRAY['mcp.server.registered'::text, 'mcp.server.degraded'::text, 'mcp.server.unhealthy'::text, 'mcp.server.recovered'::text, 'mcp.server.deregistered'::text]))),
    CONSTRAINT mcp_audit_events_to_status_check CHECK ((to_status = ANY (ARRAY['healthy'::text, 'degraded'::text, 'unhealthy'::text, 'deregistered'::text])))
);

--
-- Name: mcp_audit_events_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.mcp_audit_events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.mcp_audit_events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: mcp_cursor_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_cursor_keys (
    id integer NOT NULL,
    key bytea NOT NULL,
    CONSTRAINT mcp_cursor_keys_id_check CHECK ((id = 1)),
    CONSTRAINT mcp_cursor_keys_key_check CHECK ((octet_length(key) = 32))
);

--
-- Name: mcp_monitor_state; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_monitor_state (
    id boolean DEFAULT true NOT NULL,
    last_sweep_at timestamp with time zone,
    blind_from timestamp with time zone,
    blind_until timestamp with time zone,
    blind_windows bigint DEFAULT 0 NOT NULL,
    CONSTRAINT mcp_monitor_state_id_check CHECK (id)
);

--
-- Name: mcp_schema_functions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_schema_functions (
    singleton boolean DEFAULT true NOT NULL,
    digest text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT mcp_schema_functions_singleton_check CHECK (singleton)
);

--
-- Name: mcp_servers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_servers (
    server_id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    module_name text NOT NULL,
    version text NOT NULL,
    supported_protocols text[] NOT NULL,
    capability_advertisement jsonb,
    status text DEFAULT 'healthy'::text NOT NULL,
    last_heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    deregistered_at timestamp with time zone,
    trace_id character(32),
    remotes jsonb DEFAULT '[]'::jsonb NOT NULL,
    description text,
    title text,
    status_changed_at timestamp with time zone DEFAULT now() NOT NULL,
    capability_bytes integer GENERATED ALWAYS AS (COALESCE(octet_length((capability_advertisement)::text), 0)) STORED NOT NULL,
    CONSTRAINT mcp_servers_description_check CHECK (((char_length(description) >= 1) AND (char_length(description) <= 100))),
    CONSTRAINT mcp_servers_remotes_check CHECK (((jsonb_typeof(remotes) = 'array'::text) AND (jsonb_array_length(remotes) <= 8))),
    CONSTRAINT mcp_servers_status_check CHECK ((status = ANY (ARRAY['healthy'::text, 'degraded'::text, 'unhealthy'::text, 'deregistered'::text]))),
    CONSTRAINT mcp_servers_title_check CHECK (((char_length(title) >= 1) AND (char_length(title) <= 100)))
)
WITH (fillfactor='80');

--
-- Name: mcp_skill_alerts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_skill_alerts (
    destination text NOT NULL,
    tenant_id uuid NOT NULL,
    skill text NOT NULL,
    since timestamp with time zone NOT NULL
);

--
-- Name: mcp_skills; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_skills (
    skill_id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    server_id uuid NOT NULL,
    name text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    available boolean DEFAULT true NOT NULL,
    unavailable_reason text,
    CONSTRAINT mcp_skills_check CHECK ((available = (unavailable_reason IS NULL))),
    CONSTRAINT mcp_skills_name_check CHECK (((char_length(name) >= 1) AND (char_length(name) <= 128)))
)
WITH (fillfactor='80');

--
-- Name: mcp_sweep_tenant_list; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_sweep_tenant_list (
    tenant_id uuid NOT NULL
);

--
-- Name: mcp_tenant_feed; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_tenant_feed (
    tenant_id uuid NOT NULL,
    "position" bigint DEFAULT 0 NOT NULL,
    alert_position bigint DEFAULT 0 NOT NULL,
    CONSTRAINT mcp_tenant_feed_alert_position_check CHECK ((alert_position >= 0)),
    CONSTRAINT mcp_tenant_feed_position_check CHECK (("position" >= 0))
);

--
-- Name: mcp_tenant_servers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_tenant_servers (
    tenant_id uuid NOT NULL,
    live integer NOT NULL,
    last_sweep_at timestamp with time zone,
    blind_until timestamp with time zone,
    CONSTRAINT mcp_tenant_servers_live_check CHECK ((live >= 0))
);

--
-- Name: schema_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schema_migrations (
    version bigint NOT NULL,
    dirty boolean NOT NULL
);

--
-- Name: mcp_alert_cursors mcp_alert_cursors_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_alert_cursors
    ADD CONSTRAINT mcp_alert_cursors_pkey PRIMARY KEY (destination);

--
-- Name: mcp_alert_positions mcp_alert_positions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_alert_positions
    ADD CONSTRAINT mcp_alert_positions_pkey PRIMARY KEY (destination, tenant_id);

--
-- Name: mcp_audit_events mcp_audit_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_audit_events
    ADD CONSTRAINT mcp_audit_events_pkey PRIMARY KEY (seq);

--
-- Name: mcp_cursor_keys mcp_cursor_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_cursor_keys
    ADD CONSTRAINT mcp_cursor_keys_pkey PRIMARY KEY (id);

--
-- Name: mcp_monitor_state mcp_monitor_state_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_monitor_state
    ADD CONSTRAINT mcp_monitor_state_pkey PRIMARY KEY (id);

--
-- Name: mcp_schema_functions mcp_schema_functions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_schema_functions
    ADD CONSTRAINT mcp_schema_functions_pkey PRIMARY KEY (singleton);

--
-- Name: mcp_servers mcp_servers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_servers
    ADD CONSTRAINT mcp_servers_pkey PRIMARY KEY (server_id);

--
-- Name: mcp_servers mcp_servers_tenant_id_module_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_servers
    ADD CONSTRAINT mcp_servers_tenant_id_module_name_key UNIQUE (tenant_id, module_name);

--
-- Name: mcp_skill_alerts mcp_skill_alerts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_skill_alerts
    ADD CONSTRAINT mcp_skill_alerts_pkey PRIMARY KEY (destination, tenant_id, skill);

--
-- Name: mcp_skills mcp_skills_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_skills
    ADD CONSTRAINT mcp_skills_pkey PRIMARY KEY (skill_id);

--
-- Name: mcp_skills mcp_skills_tenant_id_server_id_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_skills
    ADD CONSTRAINT mcp_skills_tenant_id_server_id_name_key UNIQUE (tenant_id, server_id, name);

--
-- Name: mcp_sweep_tenant_list mcp_sweep_tenant_list_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_sweep_tenant_list
    ADD CONSTRAINT mcp_sweep_tenant_list_pkey PRIMARY KEY (tenant_id);

--
-- Name: mcp_tenant_feed mcp_tenant_feed_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_tenant_feed
    ADD CONSTRAINT mcp_tenant_feed_pkey PRIMARY KEY (tenant_id);

--
-- Name: mcp_tenant_servers mcp_tenant_servers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_tenant_servers
    ADD CONSTRAINT mcp_tenant_servers_pkey PRIMARY KEY (tenant_id);

--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

--
-- Name: mcp_audit_events_availability_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX mcp_audit_events_availability_idx ON public.mcp_audit_events USING btree (tenant_id, server_id, occurred_at, "position") INCLUDE (to_status);

--
-- Name: mcp_audit_events_tenant_alert_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX mcp_audit_events_tenant_alert_idx ON public.mcp_audit_events USING btree (tenant_id, "position") WHERE ((kind = ANY (ARRAY['mcp.server.unhealthy'::text, 'mcp.server.recovered'::text, 'mcp.server.deregistered'::text])) OR ((kind = 'mcp.server.registered'::text) AND (from_status = 'unhealthy'::text)));

--
-- Name: mcp_audit_events_tenant_position_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX mcp_audit_events_tenant_position_idx ON public.mcp_audit_events USING btree (tenant_id, "position");

--
-- Name: mcp_servers_sweep_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX mcp_servers_sweep_idx ON public.mcp_servers USING btree (status, last_heartbeat_at) WHERE (status = ANY (ARRAY['healthy'::text, 'degraded'::text]));

--
-- Name: mcp_skills_server_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX mcp_skills_server_idx ON public.mcp_skills USING btree (server_id);

--
-- Name: mcp_skills_tenant_name_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX mcp_skills_tenant_name_idx ON public.mcp_skills USING btree (tenant_id, name);

--
-- Name: mcp_skills mcp_skills_server_fk; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_skills
    ADD CONSTRAINT mcp_skills_server_fk FOREIGN KEY (server_id) REFERENCES public.mcp_servers(server_id);

--
-- Name: mcp_audit_events audit_rls; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY audit_rls ON public.mcp_audit_events USING ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid));

--
-- Name: mcp_audit_events; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.mcp_audit_events ENABLE ROW LEVEL SECURITY;

--
-- Name: mcp_servers; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.mcp_servers ENABLE ROW LEVEL SECURITY;

--
-- Name: mcp_skill_alerts; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.mcp_skill_alerts ENABLE ROW LEVEL SECURITY;

--
-- Name: mcp_skills; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.mcp_skills ENABLE ROW LEVEL SECURITY;

--
-- Name: mcp_tenant_feed; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.mcp_tenant_feed ENABLE ROW LEVEL SECURITY;

--
-- Name: mcp_tenant_servers; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.mcp_tenant_servers ENABLE ROW LEVEL SECURITY;

--
-- Name: mcp_servers servers_rls; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY servers_rls ON public.mcp_servers USING ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid));

--
-- Name: mcp_skills skills_rls; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY skills_rls ON public.mcp_skills USING ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid));

--
-- Name: mcp_tenant_feed tenant_feed_rls; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_feed_rls ON public.mcp_tenant_feed USING ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid));

--
-- Name: mcp_tenant_servers tenant_servers_rls; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_servers_rls ON public.mcp_tenant_servers USING ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('auth.tenant_id'::text, true), ''::text))::uuid));

--
-- Name: FUNCTION mcp_alert_ack(p_destination text, p_claimant uuid, p_tenants uuid[], p_positions bigint[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_alert_ack(p_destination text, p_claimant uuid, p_tenants uuid[], p_positions bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_alert_ack(p_destination text, p_claimant uuid, p_tenants uuid[], p_positions bigint[]) TO cyberos_app;

--
-- Name: FUNCTION mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_alert_claim(p_destination text, p_claimant uuid, p_limit integer) TO cyberos_app;

--
-- Name: FUNCTION mcp_alert_claim_of(p_destination text, p_claimant uuid, p_limit integer, p_tenants uuid[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_alert_claim_of(p_destination text, p_claimant uuid, p_limit integer, p_tenants uuid[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_alert_claim_of(p_destination text, p_claimant uuid, p_limit integer, p_tenants uuid[]) TO cyberos_app;

--
-- Name: FUNCTION mcp_alert_lease(p_destination text, p_claimant uuid, p_lease interval); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_alert_lease(p_destination text, p_claimant uuid, p_lease interval) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_alert_lease(p_destination text, p_claimant uuid, p_lease interval) TO cyberos_app;

--
-- Name: FUNCTION mcp_alert_pending(p_destination text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_alert_pending(p_destination text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_alert_pending(p_destination text) TO cyberos_app;

--
-- Name: FUNCTION mcp_audit_body(p_server_id uuid, p_module_name text, p_status text, p_version text, p_protocols text[], p_skills_affected jsonb); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.mcp_audit_body(p_server_id uuid, p_module_name text, p_status text, p_version text, p_protocols text[], p_skills_affected jsonb) TO cyberos_app;

--
-- Name: FUNCTION mcp_audit_seq(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_audit_seq() FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_audit_seq() TO cyberos_app;

--
-- Name: FUNCTION mcp_cursor_key(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_cursor_key() FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_cursor_key() TO cyberos_app;

--
-- Name: FUNCTION mcp_deregister(p_tenant uuid, p_server uuid, p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_deregister(p_tenant uuid, p_server uuid, p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_deregister(p_tenant uuid, p_server uuid, p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_feed_epoch(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_feed_epoch() FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_feed_epoch() TO cyberos_app;

--
-- Name: FUNCTION mcp_feed_horizon(p_tenant uuid, OUT epoch bigint, OUT pos bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_feed_horizon(p_tenant uuid, OUT epoch bigint, OUT pos bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_feed_horizon(p_tenant uuid, OUT epoch bigint, OUT pos bigint) TO cyberos_app;

--
-- Name: FUNCTION mcp_feed_next(p_tenant uuid, p_kind text, p_from text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_feed_next(p_tenant uuid, p_kind text, p_from text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_feed_next(p_tenant uuid, p_kind text, p_from text) TO cyberos_app;

--
-- Name: FUNCTION mcp_feed_position(p_tenant uuid); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_feed_position(p_tenant uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_feed_position(p_tenant uuid) TO cyberos_app;

--
-- Name: FUNCTION mcp_feed_read(p_tenants uuid[], p_after bigint[], p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_feed_read(p_tenants uuid[], p_after bigint[], p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_feed_read(p_tenants uuid[], p_after bigint[], p_limit integer) TO cyberos_app;

--
-- Name: FUNCTION mcp_feed_read_each(p_tenants uuid[], p_after bigint[], p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_feed_read_each(p_tenants uuid[], p_after bigint[], p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_feed_read_each(p_tenants uuid[], p_after bigint[], p_limit integer) TO cyberos_app;

--
-- Name: FUNCTION mcp_heartbeat(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_heartbeat(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_heartbeat(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_heartbeat_healthy(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_heartbeat_healthy(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_heartbeat_healthy(p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_heartbeat_healthy_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_heartbeat_healthy_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_heartbeat_healthy_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_heartbeat_held(p_tenant uuid, p_servers uuid[], p_ages bigint[], p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_heartbeat_held(p_tenant uuid, p_servers uuid[], p_ages bigint[], p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_heartbeat_held(p_tenant uuid, p_servers uuid[], p_ages bigint[], p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_heartbeat_held_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_ages bigint[], p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_heartbeat_held_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_ages bigint[], p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_heartbeat_held_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_ages bigint[], p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_heartbeat_tenant(p_tenant uuid, p_servers uuid[], p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_heartbeat_tenant(p_tenant uuid, p_servers uuid[], p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_heartbeat_tenant(p_tenant uuid, p_servers uuid[], p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_live_counts(p_tenants uuid[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_live_counts(p_tenants uuid[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_live_counts(p_tenants uuid[]) TO cyberos_app;

--
-- Name: FUNCTION mcp_now(p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

GRANT ALL ON FUNCTION public.mcp_now(p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_register(p_tenant uuid, p_new_id uuid, p_module text, p_version text, p_protocols text[], p_capabilities jsonb, p_trace text, p_remotes jsonb, p_description text, p_title text, p_skills text[], p_skill_descriptions text[], p_quota integer, p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_register(p_tenant uuid, p_new_id uuid, p_module text, p_version text, p_protocols text[], p_capabilities jsonb, p_trace text, p_remotes jsonb, p_description text, p_title text, p_skills text[], p_skill_descriptions text[], p_quota integer, p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_register(p_tenant uuid, p_new_id uuid, p_module text, p_version text, p_protocols text[], p_capabilities jsonb, p_trace text, p_remotes jsonb, p_description text, p_title text, p_skills text[], p_skill_descriptions text[], p_quota integer, p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_register_group(p_tenant uuid, p_tenants uuid[], p_new_ids uuid[], p_registrations jsonb, p_quotas integer[], p_now timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_register_group(p_tenant uuid, p_tenants uuid[], p_new_ids uuid[], p_registrations jsonb, p_quotas integer[], p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_register_group(p_tenant uuid, p_tenants uuid[], p_new_ids uuid[], p_registrations jsonb, p_quotas integer[], p_now timestamp with time zone) TO cyberos_app;

--
-- Name: FUNCTION mcp_set_tenant(p_tenant uuid); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_set_tenant(p_tenant uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_set_tenant(p_tenant uuid) TO cyberos_app;

--
-- Name: FUNCTION mcp_skill_alert_states(p_destination text, p_tenants uuid[], p_skills text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_skill_alert_states(p_destination text, p_tenants uuid[], p_skills text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_skill_alert_states(p_destination text, p_tenants uuid[], p_skills text[]) TO cyberos_app;

--
-- Name: FUNCTION mcp_skill_alerts_firing(p_destination text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_skill_alerts_firing(p_destination text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_skill_alerts_firing(p_destination text) TO cyberos_app;

--
-- Name: FUNCTION mcp_skill_alerts_firing_of(p_destination text, p_tenants uuid[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_skill_alerts_firing_of(p_destination text, p_tenants uuid[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_skill_alerts_firing_of(p_destination text, p_tenants uuid[]) TO cyberos_app;

--
-- Name: FUNCTION mcp_skill_alerts_record(p_destination text, p_tenants uuid[], p_skills text[], p_since timestamp with time zone[], p_resolved_tenants uuid[], p_resolved_skills text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_skill_alerts_record(p_destination text, p_tenants uuid[], p_skills text[], p_since timestamp with time zone[], p_resolved_tenants uuid[], p_resolved_skills text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_skill_alerts_record(p_destination text, p_tenants uuid[], p_skills text[], p_since timestamp with time zone[], p_resolved_tenants uuid[], p_resolved_skills text[]) TO cyberos_app;

--
-- Name: FUNCTION mcp_status_counts(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_status_counts() FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_status_counts() TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer) TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_due(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_due(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_due(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval) TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_due_of(p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_due_of(p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_due_of(p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval) TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval) TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_guard(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_blind_after interval); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_guard(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_blind_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_guard(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_blind_after interval) TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_guarded(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_guarded(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_guarded(p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval) TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_mark_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_blind_after interval); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_mark_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_blind_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_mark_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_blind_after interval) TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_tenant(p_tenant uuid, p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_tenant(p_tenant uuid, p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_tenant(p_tenant uuid, p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval) TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_tenants(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_tenants() FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_tenants() TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_tenants_save(p_tenants uuid[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_tenants_save(p_tenants uuid[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_tenants_save(p_tenants uuid[]) TO cyberos_app;

--
-- Name: FUNCTION mcp_sweep_tenants_saved(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_sweep_tenants_saved() FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_sweep_tenants_saved() TO cyberos_app;

--
-- Name: FUNCTION mcp_unhealthy_servers(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_unhealthy_servers() FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_unhealthy_servers() TO cyberos_app;

--
-- Name: FUNCTION mcp_unhealthy_servers_of(p_tenants uuid[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.mcp_unhealthy_servers_of(p_tenants uuid[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mcp_unhealthy_servers_of(p_tenants uuid[]) TO cyberos_app;

--
-- Name: TABLE mcp_audit_events; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.mcp_audit_events TO cyberos_app;

--
-- Name: TABLE mcp_schema_functions; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.mcp_schema_functions TO cyberos_app;

--
-- Name: TABLE mcp_servers; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.version; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(version) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.supported_protocols; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(supported_protocols) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.capability_advertisement; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(capability_advertisement) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.status; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(status) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.last_heartbeat_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(last_heartbeat_at) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.deregistered_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(deregistered_at) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.remotes; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(remotes) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.description; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(description) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.title; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(title) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: COLUMN mcp_servers.status_changed_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(status_changed_at) ON TABLE public.mcp_servers TO cyberos_app;

--
-- Name: TABLE mcp_skills; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE ON TABLE public.mcp_skills TO cyberos_app;

--
-- Name: COLUMN mcp_skills.description; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(description) ON TABLE public.mcp_skills TO cyberos_app;

--
-- Name: COLUMN mcp_skills.available; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(available) ON TABLE public.mcp_skills TO cyberos_app;

--
-- Name: COLUMN mcp_skills.unavailable_reason; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(unavailable_reason) ON TABLE public.mcp_skills TO cyberos_app;

--
-- Name: TABLE mcp_tenant_feed; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.mcp_tenant_feed TO cyberos_app;

--
-- Name: COLUMN mcp_tenant_feed."position"; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE("position") ON TABLE public.mcp_tenant_feed TO cyberos_app;

--
-- Name: COLUMN mcp_tenant_feed.alert_position; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(alert_position) ON TABLE public.mcp_tenant_feed TO cyberos_app;

--
-- Name: TABLE mcp_tenant_servers; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.mcp_tenant_servers TO cyberos_app;

--
-- Name: COLUMN mcp_tenant_servers.live; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(live) ON TABLE public.mcp_tenant_servers TO cyberos_app;

--
-- Name: TABLE schema_migrations; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.schema_migrations TO cyberos_app;

--
-- PostgreSQL database dump complete
--
