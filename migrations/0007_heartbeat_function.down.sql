DROP FUNCTION IF EXISTS mcp_heartbeat(uuid[], uuid[], timestamptz);
