-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_heartbeat_held(p_tenant uuid, p_servers uuid[], p_ages bigint[], p_now timestamp with time zone)
 RETURNS TABLE(o_tenant_id uuid, o_server_id uuid, o_prev_status text, s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_heartbeat_held(uuid,uuid[],bigint[],timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat_held(uuid,uuid[],bigint[],timestamp with time zone) TO cyberos_app;
