DROP FUNCTION IF EXISTS mcp_sweep_ended(interval);
DROP FUNCTION IF EXISTS mcp_sweep_slack();
ALTER TABLE mcp_monitor_state DROP COLUMN IF EXISTS last_sweep_end;
-- The functions are no longer the set that any build applied: the next
-- migrate up (this build's or the previous one's) applies its own.
DELETE FROM mcp_schema_functions;
