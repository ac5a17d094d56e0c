DROP TRIGGER mcp_servers_count_live_update ON mcp_servers;
DROP TRIGGER mcp_servers_count_live_insert ON mcp_servers;
DROP FUNCTION mcp_servers_count_live();
DROP TABLE mcp_tenant_servers;

DROP TRIGGER mcp_servers_capability_bytes ON mcp_servers;
DROP FUNCTION mcp_servers_capability_bytes();
ALTER TABLE mcp_servers DROP COLUMN capability_bytes;
