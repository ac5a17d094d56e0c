-- Applied by migrate up after the numbered migrations: migrations/embed.go.
--
-- Registers the tenant's module: creates the server (id p_new_id) or
-- updates the one of that module, replaces its skills, counts it for the
-- quota when it is live again, and writes the registered event at the
-- tenant's next feed position; one statement, so that Citus hands it whole
-- to the worker of the tenant's shard. As its caller, under row-level
-- security for p_tenant. The quota (p_quota, 0: none) is counted under
-- the lock of the tenant's row of mcp_tenant_servers; a new server past it
-- raises SQLSTATE MCQ01.
CREATE OR REPLACE FUNCTION mcp_register(p_tenant uuid, p_new_id uuid, p_module text, p_version text,
    p_protocols text[], p_capabilities jsonb, p_trace text, p_remotes jsonb, p_description text,
    p_title text, p_skills text[], p_skill_descriptions text[], p_quota integer,
    p_now timestamp with time zone)
 RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[],
    s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone,
    s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text,
    s_remotes jsonb, s_description text, s_title text,
    e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text,
    e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone,
    e_body jsonb, r_created boolean)
 LANGUAGE plpgsql
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_register(uuid, uuid, text, text, text[], jsonb, text, jsonb, text, text, text[], text[], integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_register(uuid, uuid, text, text, text[], jsonb, text, jsonb, text, text, text[], text[], integer, timestamptz) TO cyberos_app;
