DROP FUNCTION IF EXISTS mcp_audit_seq();
-- The functions are no longer the set that any build applied: the next
-- migrate up (this build's or the previous one's) applies its own.
DELETE FROM mcp_schema_functions;
