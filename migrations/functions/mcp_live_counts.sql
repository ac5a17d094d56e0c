-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_live_counts(p_tenants uuid[])
 RETURNS TABLE(tenant_id uuid, live bigint)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.tenant_id, count(*) FROM mcp_servers s
        WHERE s.tenant_id = ANY (p_tenants) AND s.status <> 'deregistered'
        GROUP BY s.tenant_id;
END
$function$;

REVOKE ALL ON FUNCTION mcp_live_counts(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_live_counts(uuid[]) TO cyberos_app;
