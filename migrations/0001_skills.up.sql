-- The part of the skill registry (upstream TASK-MCP-001) that mcpd needs:
-- the skills each server offers, per tenant, and whether they are available.
-- Roles are cluster-wide: a migration of another database of the cluster may
-- be creating cyberos_app at this very moment. Its CREATE ROLE is invisible
-- to the check until it commits, and ours then fails on the duplicate, so a
-- duplicate is taken as the role being there.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cyberos_app') THEN
        CREATE ROLE cyberos_app NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

CREATE TABLE mcp_skills (
    skill_id           UUID PRIMARY KEY,
    tenant_id          UUID NOT NULL,
    server_id          UUID NOT NULL,
    name               TEXT NOT NULL CHECK (char_length(name) BETWEEN 1 AND 128),
    description        TEXT NOT NULL DEFAULT '',
    available          BOOLEAN NOT NULL DEFAULT true,
    -- Why a skill is unavailable. 'server_unhealthy' and 'server_deregistered'
    -- are set by mcpd's cascade and undone by a recovery; any other reason is
    -- the skill's own and no recovery touches it.
    unavailable_reason TEXT,
    CHECK (available = (unavailable_reason IS NULL)),
    UNIQUE (tenant_id, server_id, name)
) WITH (fillfactor = 80); -- room for HOT updates of availability

CREATE INDEX mcp_skills_server_idx ON mcp_skills (server_id);

ALTER TABLE mcp_skills ENABLE ROW LEVEL SECURITY;
CREATE POLICY skills_rls ON mcp_skills
    USING (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid);

GRANT SELECT, INSERT, DELETE ON mcp_skills TO cyberos_app;
GRANT UPDATE (description, available, unavailable_reason) ON mcp_skills TO cyberos_app;

-- mcpd's /readyz compares the applied schema version with the one it expects.
GRANT SELECT ON schema_migrations TO cyberos_app;
