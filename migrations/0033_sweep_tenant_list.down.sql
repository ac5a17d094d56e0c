DROP FUNCTION IF EXISTS mcp_sweep_tenants_save(uuid[]);
DROP FUNCTION IF EXISTS mcp_sweep_tenants_saved();
DROP TABLE IF EXISTS mcp_sweep_tenant_list;
-- The functions are no longer the set that any build applied: the next
-- migrate up (this build's or the previous one's) applies its own.
DELETE FROM mcp_schema_functions;
