-- On Citus, a position read on the tenant's worker itself carries the
-- coordinator's epoch, not the worker's: it reads the tenant's position
-- alone (functions/mcp_feed_position.sql), without mcp_feed_horizon's
-- epoch, which it would throw away. No table changes: the function's file
-- creates it, and the down drops it.
SELECT 1;
