DROP FUNCTION IF EXISTS mcp_live_counts(uuid[]);
DROP FUNCTION IF EXISTS mcp_sweep_guarded(timestamptz, interval, interval, integer, interval);
DROP TABLE IF EXISTS mcp_monitor_state;
