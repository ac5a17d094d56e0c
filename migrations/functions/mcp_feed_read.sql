-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_feed_read(p_tenants uuid[], p_after bigint[], p_limit integer)
 RETURNS TABLE(epoch bigint, feed_tenant uuid, horizon bigint, event_position bigint, seq bigint, event_id uuid, tenant_id uuid, kind text, server_id uuid, module_name text, from_status text, to_status text, trace_id text, occurred_at timestamp with time zone, body jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_epoch bigint := mcp_feed_epoch();
BEGIN
    RETURN QUERY
    SELECT v_epoch, r.tenant, COALESCE(f.position, 0), e.position, e.seq, e.event_id, e.tenant_id, e.kind,
           e.server_id, e.module_name, e.from_status, e.to_status, e.trace_id::text, e.occurred_at, e.body
    FROM unnest(p_tenants, p_after) WITH ORDINALITY AS r(tenant, after, ord)
    LEFT JOIN mcp_tenant_feed f ON f.tenant_id = r.tenant
    LEFT JOIN LATERAL (
        SELECT a.* FROM mcp_audit_events a
        WHERE a.tenant_id = r.tenant AND a.position > r.after AND a.position <= f.position
        ORDER BY a.position
        LIMIT p_limit
    ) e ON true
    ORDER BY r.ord, e.position;
END
$function$;

REVOKE ALL ON FUNCTION mcp_feed_read(uuid[],bigint[],integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_feed_read(uuid[],bigint[],integer) TO cyberos_app;
