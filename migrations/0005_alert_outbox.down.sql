DROP FUNCTION IF EXISTS mcp_unhealthy_servers();
DROP FUNCTION IF EXISTS mcp_alert_pending(text);
DROP FUNCTION IF EXISTS mcp_alert_ack(text, text, bigint);
DROP FUNCTION IF EXISTS mcp_alert_claim(text, integer);
DROP TABLE IF EXISTS mcp_alert_cursors;
DROP INDEX IF EXISTS mcp_audit_events_alert_idx;
ALTER TABLE mcp_audit_events DROP COLUMN IF EXISTS txid;
