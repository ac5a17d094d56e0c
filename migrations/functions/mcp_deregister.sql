-- Applied by migrate up after the numbered migrations: migrations/embed.go.
--
-- Deregisters the tenant's server p_server: marks it deregistered at
-- p_now (NULL: now()), makes its skills unavailable (all but those
-- unavailable for a reason of their own), takes it off the tenant's count
-- of live servers and writes the deregistered event at the tenant's next
-- feed position, in one call, so that Citus hands it whole to the worker
-- of the tenant's shard (or the store makes it there) instead of the
-- coordinator planning and sending nine statements. As its caller, under
-- row-level security for p_tenant. The locks in the order a registration
-- takes them: the server's row, the tenant's count, the tenant's feed
-- counter. A server already deregistered is returned as it is, with the
-- event's columns NULL; one that does not exist (or is another tenant's)
-- returns no row.
CREATE OR REPLACE FUNCTION mcp_deregister(p_tenant uuid, p_server uuid, p_now timestamp with time zone)
 RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[],
    s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone,
    s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text,
    s_remotes jsonb, s_description text, s_title text,
    e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text,
    e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone,
    e_body jsonb)
 LANGUAGE plpgsql
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_deregister(uuid, uuid, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_deregister(uuid, uuid, timestamptz) TO cyberos_app;
