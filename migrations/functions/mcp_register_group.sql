-- Applied by migrate up after the numbered migrations: migrations/embed.go.
--
-- On Citus, registrations of several tenants of one worker in one call:
-- registration i is of tenant p_tenants[i], its new server id
-- p_new_ids[i], its quota p_quotas[i], and its fields element i of the
-- JSON array p_registrations (module_name, version, protocols,
-- capabilities, trace_id, remotes, description, title, skills,
-- skill_descriptions), each registered by mcp_register in turn and
-- returned with its index r_index (from 1). p_tenant is the tenant by
-- which Citus hands the call whole to its worker, where the other
-- tenants' shards are too, so that the registrations share one
-- delegation and one commit. A registration refused for its tenant's
-- quota (MCQ01) is undone alone (a subtransaction) and returned as a row
-- of its index and nothing else, so that one tenant past its quota does
-- not fail the others' registrations; any other error of a registration
-- fails them all, and the caller then registers each alone. The caller
-- gives each tenant at most once, in
-- one order (of tenant), so that two calls take the tenants' locks in
-- the same order and do not deadlock.
CREATE OR REPLACE FUNCTION mcp_register_group(p_tenant uuid, p_tenants uuid[], p_new_ids uuid[],
    p_registrations jsonb, p_quotas integer[], p_now timestamp with time zone)
 RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[],
    s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone,
    s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text,
    s_remotes jsonb, s_description text, s_title text,
    e_seq bigint, e_event_id uuid, e_tenant_id uuid, e_kind text, e_server_id uuid, e_module_name text,
    e_from_status text, e_to_status text, e_trace_id text, e_occurred_at timestamp with time zone,
    e_body jsonb, r_created boolean, r_index integer)
 LANGUAGE plpgsql
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_register_group(uuid, uuid[], uuid[], jsonb, integer[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_register_group(uuid, uuid[], uuid[], jsonb, integer[], timestamptz) TO cyberos_app;
