-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- On Citus, the healthy servers' heartbeats of the tenants of one worker:
-- the (tenant, server) pairs $2, $3 at $4 (NULL: now()), whose tenants'
-- shards are on p_tenant's worker, to which the call is handed whole; the
-- worker runs the update on each of its shards that the tenants use,
-- locally, in one transaction. A pair updates only its own tenant's
-- server; pairs of servers that are not healthy return nothing and go to
-- mcp_heartbeat_tenant.
CREATE OR REPLACE FUNCTION mcp_heartbeat_healthy_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_now timestamp with time zone)
 RETURNS TABLE(s_server_id uuid, s_tenant_id uuid, s_module_name text, s_version text, s_protocols text[], s_capabilities jsonb, s_status text, s_last_heartbeat timestamp with time zone, s_registered_at timestamp with time zone, s_deregistered_at timestamp with time zone, s_trace_id text, s_remotes jsonb, s_description text, s_title text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_heartbeat_healthy_group(uuid,uuid[],uuid[],timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat_healthy_group(uuid,uuid[],uuid[],timestamp with time zone) TO cyberos_app;
