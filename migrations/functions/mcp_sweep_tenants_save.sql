-- Applied by migrate up after the numbered migrations: migrations/embed.go.
-- Saves p_tenants, a list of tenants that the Citus sweep read, as the
-- coordinator's list (migration 0033), for a replica that cannot read one.
CREATE OR REPLACE FUNCTION mcp_sweep_tenants_save(p_tenants uuid[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    DELETE FROM mcp_sweep_tenant_list l WHERE NOT (l.tenant_id = ANY (p_tenants));
    INSERT INTO mcp_sweep_tenant_list (tenant_id)
    SELECT t FROM unnest(p_tenants) AS t
    ON CONFLICT (tenant_id) DO NOTHING;
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_tenants_save(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_tenants_save(uuid[]) TO cyberos_app;
