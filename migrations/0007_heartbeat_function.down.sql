DROP FUNCTION IF EXISTS mcp_heartbeat_healthy(uuid[], uuid[], timestamptz);
DROP FUNCTION IF EXISTS mcp_heartbeat(uuid[], uuid[], timestamptz);
