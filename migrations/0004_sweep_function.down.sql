DROP FUNCTION IF EXISTS mcp_status_counts();
DROP FUNCTION IF EXISTS mcp_sweep(timestamptz, interval, interval, integer);
