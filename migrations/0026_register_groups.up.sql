-- On Citus, concurrent registrations of tenants of one worker go in one
-- call (functions/mcp_register_group.sql) instead of one call each. No
-- table changes: the function's file creates it, and the down drops it.
SELECT 1;
