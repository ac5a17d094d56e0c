-- On Citus the sweep reads which tenants have anything due in one read of
-- every shard (functions/mcp_sweep_due.sql) and sweeps those tenants
-- alone, marking the others swept in one call per worker
-- (functions/mcp_sweep_mark_group.sql), instead of a transaction for every
-- tenant. No table changes: the functions' files create them, and the down
-- drops them.
SELECT 1;
