-- The registry of MCP servers, as the design gives it.
CREATE TABLE mcp_servers (
    server_id UUID PRIMARY KEY,
    tenant_id UUID NOT NULL,
    module_name TEXT NOT NULL,
    version TEXT NOT NULL,
    supported_protocols TEXT[] NOT NULL,
    capability_advertisement JSONB,
    status TEXT NOT NULL DEFAULT 'healthy'
        CHECK (status IN ('healthy', 'degraded', 'unhealthy', 'deregistered')),
    last_heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    registered_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    deregistered_at TIMESTAMPTZ,
    trace_id CHAR(32),
    UNIQUE (tenant_id, module_name)
) WITH (fillfactor = 80);

-- The sweep's access path: only servers that the monitor may still move
-- (healthy or degraded), ordered by their last heartbeat, so that a sweep
-- reads only what is due. See docs/performance.md for the trade-off against
-- HOT updates on the heartbeat path.
CREATE INDEX mcp_servers_sweep_idx ON mcp_servers (status, last_heartbeat_at)
    WHERE status IN ('healthy', 'degraded');

ALTER TABLE mcp_servers ENABLE ROW LEVEL SECURITY;
-- current_setting(..., true) so that a session without a tenant sees no rows
-- instead of failing on an unknown setting.
CREATE POLICY servers_rls ON mcp_servers
    USING (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid);

GRANT SELECT, INSERT ON mcp_servers TO cyberos_app;
GRANT UPDATE (version, supported_protocols, capability_advertisement, status, last_heartbeat_at, deregistered_at)
    ON mcp_servers TO cyberos_app;
