-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_sweep_tenant(p_tenant uuid, p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval)
 RETURNS TABLE(event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_tenant(uuid,timestamp with time zone,interval,interval,integer,interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_tenant(uuid,timestamp with time zone,interval,interval,integer,interval) TO cyberos_app;
