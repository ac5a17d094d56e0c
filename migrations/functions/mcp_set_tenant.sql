-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_set_tenant(p_tenant uuid)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    SET LOCAL citus.propagate_set_commands TO 'local';
    EXECUTE format('SET LOCAL auth.tenant_id TO %L', p_tenant::text);
END
$function$;

REVOKE ALL ON FUNCTION mcp_set_tenant(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_set_tenant(uuid) TO cyberos_app;
