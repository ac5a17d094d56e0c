-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- The list of tenants that a Citus sweep saved last
-- (mcp_sweep_tenants_save), from the coordinator alone.
CREATE OR REPLACE FUNCTION mcp_sweep_tenants_saved()
 RETURNS TABLE(tenant_id uuid)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY SELECT l.tenant_id FROM mcp_sweep_tenant_list l ORDER BY l.tenant_id;
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_tenants_saved() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_tenants_saved() TO cyberos_app;
