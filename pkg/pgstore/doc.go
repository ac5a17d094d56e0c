// Package pgstore is the PostgreSQL implementation of heartbeat.Store. Every
// tenant call runs in a transaction scoped to its tenant by
// set_config('auth.tenant_id', ..., true), so row-level security is the
// second wall behind the API's token check; the cross-tenant sweep runs
// through the SECURITY DEFINER function mcp_sweep.
package pgstore
