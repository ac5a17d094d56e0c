-- On Citus, while a worker is down the sweep reads which of the other
-- workers' tenants have a server due (functions/mcp_sweep_due_of.sql),
-- instead of sweeping every tenant one by one. No table changes: the
-- function's file creates it, and the down drops it.
SELECT 1;
