-- On Citus the heartbeats of healthy servers go to one call per worker, for
-- every tenant of that worker (functions/mcp_heartbeat_healthy_group.sql),
-- instead of one call per tenant: the per-tenant form goes. No table
-- changes.
DROP FUNCTION IF EXISTS mcp_heartbeat_healthy_tenant(uuid, uuid[], timestamptz);
