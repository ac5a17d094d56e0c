-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_audit_body(p_server_id uuid, p_module_name text, p_status text, p_version text, p_protocols text[], p_skills_affected jsonb)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT jsonb_build_object(
        'server_id', p_server_id,
        'module_name', p_module_name,
        'status', p_status,
        'version', p_version,
        'supported_protocols', to_jsonb(p_protocols),
        'skills_affected', COALESCE(p_skills_affected, '[]'::jsonb));
$function$;

GRANT EXECUTE ON FUNCTION mcp_audit_body(uuid,text,text,text,text[],jsonb) TO cyberos_app;
