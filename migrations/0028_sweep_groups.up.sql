-- On Citus the sweep moves the tenants due of each worker in one call to
-- that worker (functions/mcp_sweep_group.sql), instead of one call, and
-- one transaction, for every tenant due. No table changes: the function's
-- file creates it, and the down drops it.
SELECT 1;
