ALTER TABLE mcp_skills DROP CONSTRAINT IF EXISTS mcp_skills_server_fk;
DROP TABLE IF EXISTS mcp_audit_events;
