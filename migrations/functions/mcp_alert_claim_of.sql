-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- The alert claim of the tenants p_tenants (NULL: every tenant, which
-- mcp_alert_claim is). On Citus, while a worker is down, a claim of every
-- tenant fails (it reads every shard):
-- the store claims the tenants of each worker that answers with a call of
-- its own (pkg/pgstore/alertworkers.go), whose filter on the distribution
-- column (a constant in each custom plan) leaves Citus that worker's
-- shards alone: each table of the join is filtered, as Citus prunes the
-- shards of each by its own filters (with the feed's alone, the join ran
-- on every shard). The order is the claim's, so that the calls' answers
-- merge into one.
CREATE OR REPLACE FUNCTION mcp_alert_claim_of(p_destination text, p_claimant uuid, p_limit integer, p_tenants uuid[])
 RETURNS TABLE(event_position bigint, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
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
$function$;

REVOKE ALL ON FUNCTION mcp_alert_claim_of(text,uuid,integer,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_alert_claim_of(text,uuid,integer,uuid[]) TO cyberos_app;
