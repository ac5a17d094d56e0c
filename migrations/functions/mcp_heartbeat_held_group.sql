-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- On Citus, a flush's held heartbeats of the tenants of one worker: the
-- (tenant, server) pairs $2, $3, received $4 microseconds before $5 (NULL:
-- now()), whose tenants' shards are on p_tenant's worker, to which the call
-- is handed whole; the worker updates each of its shards that the tenants
-- use, locally, in one transaction. A pair updates only its own tenant's
-- server, and only a healthy one; the pairs written are returned, and the
-- others (not healthy, not the tenant's) go to mcp_heartbeat_held. Citus
-- runs no SELECT ... FOR UPDATE SKIP LOCKED across shards, so unlike
-- mcp_heartbeat_held, which never waits, this call waits for a row that
-- another transaction holds, at most lock_timeout (50 ms, on this worker;
-- a task that a moved shard sends elsewhere waits up to the caller's
-- timeout): then it fails whole, and its tenants go to mcp_heartbeat_held,
-- which skips such rows. A row held for long delays its worker's other
-- tenants by that much a flush, and never holds up the window.
CREATE OR REPLACE FUNCTION mcp_heartbeat_held_group(p_tenant uuid, p_tenants uuid[], p_servers uuid[], p_ages bigint[], p_now timestamp with time zone)
 RETURNS TABLE(o_tenant_id uuid, o_server_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
 SET lock_timeout TO '50ms'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_heartbeat_held_group(uuid,uuid[],uuid[],bigint[],timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_heartbeat_held_group(uuid,uuid[],uuid[],bigint[],timestamp with time zone) TO cyberos_app;
