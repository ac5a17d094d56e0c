REVOKE INSERT, UPDATE (position, alert_position) ON mcp_tenant_feed FROM cyberos_app;
ALTER FUNCTION mcp_feed_next(uuid, text, text) SECURITY DEFINER;
DROP FUNCTION mcp_now(timestamptz);
DROP FUNCTION mcp_set_tenant(uuid);
