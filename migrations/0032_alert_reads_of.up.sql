-- On Citus, while a worker is down, the alert dispatcher reads the claim,
-- the unhealthy servers and the firing skill alerts of the other workers'
-- tenants (functions/mcp_alert_claim_of.sql,
-- functions/mcp_unhealthy_servers_of.sql,
-- functions/mcp_skill_alerts_firing_of.sql), instead of failing on a read
-- of every shard. No table changes: the functions' files create them, and
-- the down drops them.
SELECT 1;
