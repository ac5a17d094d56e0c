-- The append-only audit trail: exactly five kinds, one event per transition.
CREATE TABLE mcp_audit_events (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Random (gen_random_uuid): unique without an index, which every
    -- transition would pay for; seq is the key.
    event_id    UUID NOT NULL,
    tenant_id   UUID NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN (
                    'mcp.server.registered', 'mcp.server.degraded', 'mcp.server.unhealthy',
                    'mcp.server.recovered', 'mcp.server.deregistered')),
    -- No foreign key: servers are never deleted (cyberos_app has no DELETE),
    -- every event is written from its server's row in the same statement,
    -- and a key check per event would cost the sweep a lookup each.
    server_id   UUID NOT NULL,
    module_name TEXT NOT NULL,
    from_status TEXT CHECK (from_status IN ('healthy', 'degraded', 'unhealthy', 'deregistered')),
    to_status   TEXT NOT NULL CHECK (to_status IN ('healthy', 'degraded', 'unhealthy', 'deregistered')),
    trace_id    CHAR(32),
    occurred_at TIMESTAMPTZ NOT NULL,
    body        JSONB NOT NULL
);

CREATE INDEX mcp_audit_events_tenant_seq_idx ON mcp_audit_events (tenant_id, seq);
-- A listing by server goes through the tenant's index: one index fewer for
-- every transition to maintain.

ALTER TABLE mcp_audit_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_rls ON mcp_audit_events
    USING (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid);

GRANT SELECT, INSERT ON mcp_audit_events TO cyberos_app;

ALTER TABLE mcp_skills
    ADD CONSTRAINT mcp_skills_server_fk FOREIGN KEY (server_id) REFERENCES mcp_servers (server_id);
