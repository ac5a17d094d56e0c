DROP FUNCTION IF EXISTS mcp_heartbeat_held(uuid, uuid[], bigint[], timestamptz);
