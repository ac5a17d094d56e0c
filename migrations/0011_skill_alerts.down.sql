DROP FUNCTION IF EXISTS mcp_skill_alerts_record(text, uuid[], text[], timestamptz[], uuid[], text[]);
DROP FUNCTION IF EXISTS mcp_skill_alerts_firing(text);
DROP FUNCTION IF EXISTS mcp_skill_alert_states(text, uuid[], text[]);
DROP TABLE IF EXISTS mcp_skill_alerts;
