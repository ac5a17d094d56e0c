-- On Citus, the list of tenants that the sweep read last (tenants with live
-- servers), kept on the coordinator: a replica that starts while a worker
-- is down cannot read the list (it reads every shard), and swept nothing,
-- nor delivered any alert, until the worker returned. It sweeps the list
-- saved here instead (functions/mcp_sweep_tenants_save.sql,
-- functions/mcp_sweep_tenants_saved.sql). A plain table of the coordinator,
-- as mcp_monitor_state, that only those functions read and write; on plain
-- PostgreSQL it stays empty.
CREATE TABLE mcp_sweep_tenant_list (
    tenant_id UUID PRIMARY KEY
);
