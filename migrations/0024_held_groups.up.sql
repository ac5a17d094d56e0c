-- On Citus a flush of held heartbeats goes in one call per worker, for
-- every tenant of that worker (functions/mcp_heartbeat_held_group.sql),
-- instead of one call per tenant; the tenants whose servers are not all
-- healthy then go one by one through mcp_heartbeat_held. No table changes:
-- the function's file creates it, and the down drops it.
SELECT 1;
