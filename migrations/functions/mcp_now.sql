-- Applied by migrate up after the numbered migrations: migrations/embed.go.
CREATE OR REPLACE FUNCTION mcp_now(p_now timestamp with time zone)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    RETURN COALESCE(p_now, now());
END
$function$;

GRANT EXECUTE ON FUNCTION mcp_now(timestamp with time zone) TO cyberos_app;
