DROP FUNCTION IF EXISTS mcp_alert_claim_of(text, uuid, integer, uuid[]);
DROP FUNCTION IF EXISTS mcp_unhealthy_servers_of(uuid[]);
DROP FUNCTION IF EXISTS mcp_skill_alerts_firing_of(text, uuid[]);
-- The functions are no longer the set that any build applied: the next
-- migrate up (this build's or the previous one's) applies its own.
DELETE FROM mcp_schema_functions;
