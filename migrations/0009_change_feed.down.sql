DROP FUNCTION mcp_cursor_key();
DROP TABLE mcp_cursor_keys;
DROP FUNCTION mcp_feed_read(xid8, bigint, integer);
DROP FUNCTION mcp_feed_horizon();
DROP INDEX mcp_skills_tenant_name_idx;
CREATE INDEX mcp_audit_events_tenant_seq_idx ON mcp_audit_events (tenant_id, seq);
DROP INDEX mcp_audit_events_tenant_txid_idx;
DROP INDEX mcp_audit_events_feed_idx;
