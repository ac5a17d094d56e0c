// Package pgstore is the PostgreSQL implementation of store.Store. Every
// tenant call runs in a transaction scoped to its tenant by
// set_config('auth.tenant_id', ..., true) (on Citus mcp_set_tenant: SET
// LOCAL, which Citus carries to the workers), so row-level security is the
// second wall behind the API's token check. The heartbeat path and the
// sweep run through SECURITY DEFINER functions, where row-level security
// does not apply: mcp_heartbeat (migration 0013) and mcp_heartbeat_healthy
// (0007) touch only the (tenant_id, server_id) pairs they are given, each
// tenant from its caller's token, and that join keeps tenants apart;
// mcp_sweep (0013) and mcp_sweep_guarded (0006) are the one way across
// tenants. Every audit row is decoded by one scanner, eventRow.
package pgstore
