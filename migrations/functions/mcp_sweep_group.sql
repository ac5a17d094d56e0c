-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- On Citus, sweeps the tenants p_tenants as mcp_sweep_tenant sweeps each,
-- in one transaction: at most p_limit transitions in all, a shard's
-- tenants at a time (the shards in the order of their first tenant), each
-- shard's servers due in the order of (tenant_id, server_id). The
-- tenants' shards are on p_tenant's worker, to which the call is handed
-- whole (function call delegation), so that a worker with many tenants
-- due gets one call a sweep, not one for each.
--
-- First the tenants together, in a subtransaction of a few statements
-- for each shard, each naming the shard's tenants of the call, whether
-- one tenant is due or thousands: the dozen statements of
-- mcp_sweep_tenant for each tenant due, each through Citus's planner,
-- took a worker's call past a sweep of a second for a backlog of 3,000
-- tenants due at once (2026-12-06). For each shard its tenants are marked
-- swept at p_now, with their blind windows as mcp_sweep_tenant keeps them
-- (p_blind_after set); their servers due move; each tenant's feed
-- position moves by its transitions (a transition at each next position,
-- in the order of server_id) and its alert position to its last unhealthy
-- one; an unhealthy server's skills become unavailable; and the
-- transitions' audit events are written.
--
-- The call waits for no tenant or server row that another transaction
-- holds: it takes a shard's tenants' rows of mcp_tenant_feed and
-- mcp_tenant_servers, and their servers due, with SKIP LOCKED (statements
-- of one shard each, which Citus plans with row locks). A tenant whose row
-- is held is left, to be swept alone; a server that is held (its
-- heartbeat being written) is not due now, as in mcp_sweep_tenant. A wait
-- for any other lock lasts at most lock_timeout; then all the call did is
-- undone and it sweeps its tenants one after another, each in a
-- subtransaction that takes its tenant's rows with NOWAIT and its
-- servers' rows with SKIP LOCKED (mcp_sweep_tenant). A transaction that
-- holds one tenant's rows and waits for another's (a heartbeat or
-- registration group of the same worker) so never meets the call in a
-- deadlock. (A first version waited up to lock_timeout for every held
-- row, so that one tenant written to during the sweep undid the whole
-- call and sent every tenant of it down the slow path.)
--
-- Returns the transitions made, and for each tenant left to sweep alone one
-- row whose event_id is NULL: a tenant whose rows were held (one after
-- another), one the limit did not reach, and one whose servers the limit
-- cut (it may have more due).
CREATE OR REPLACE FUNCTION mcp_sweep_group(p_tenant uuid, p_tenants uuid[], p_now timestamp with time zone, p_degraded_after interval, p_unhealthy_after interval, p_limit integer, p_blind_after interval)
 RETURNS TABLE(event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
 SET lock_timeout TO '50ms'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_group(uuid,uuid[],timestamp with time zone,interval,interval,integer,interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_group(uuid,uuid[],timestamp with time zone,interval,interval,integer,interval) TO cyberos_app;
