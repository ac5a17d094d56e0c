-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_heartbeat_tenant(p_tenant uuid, p_servers uuid[], p_now timestamp with time zone)
 RETURNS TABLE(o_tenant_id uuid, o_server_id uuid, o_prev_status text, s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text, e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text, e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone, e_body jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_heartbeat_tenant(uuid,uuid[],timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat_tenant(uuid,uuid[],timestamp with time zone) TO cyberos_app;
