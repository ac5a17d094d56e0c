-- A deregistration is one call of mcp_deregister
-- (functions/mcp_deregister.sql), which Citus hands whole to the worker of
-- the tenant's shard, instead of a transaction of nine statements. No
-- table changes: the function's file creates it, and the down drops it.
SELECT 1;
