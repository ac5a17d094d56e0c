DROP FUNCTION IF EXISTS mcp_sweep(timestamptz, interval, interval, integer);
