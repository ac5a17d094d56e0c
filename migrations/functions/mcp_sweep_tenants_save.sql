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
    -- Saves of several replicas one at a time: a DELETE and an INSERT of
    -- two at once could mix their lists, or deadlock.
    LOCK TABLE mcp_sweep_tenant_list IN EXCLUSIVE MODE;
    DELETE FROM mcp_sweep_tenant_list l
    WHERE NOT EXISTS (SELECT 1 FROM unnest(p_tenants) AS t WHERE t = l.tenant_id);
    INSERT INTO mcp_sweep_tenant_list (tenant_id)
    SELECT t FROM unnest(p_tenants) AS t
    ON CONFLICT (tenant_id) DO NOTHING;
END
$function$;

REVOKE ALL ON FUNCTION mcp_sweep_tenants_save(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_sweep_tenants_save(uuid[]) TO cyberos_app;
