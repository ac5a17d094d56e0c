DROP INDEX IF EXISTS mcp_audit_events_availability_idx;
