DROP TRIGGER mcp_servers_capability_bytes ON mcp_servers;
DROP FUNCTION mcp_servers_capability_bytes();
ALTER TABLE mcp_servers DROP COLUMN capability_bytes;
