-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_sweep_tenants()
 RETURNS TABLE(tenant_id uuid)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY SELECT t.tenant_id FROM mcp_tenant_servers t WHERE t.live > 0 ORDER BY t.tenant_id;
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_tenants() TO cyberos_app;
