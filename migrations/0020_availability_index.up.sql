-- Availability (GET /v1/mcp/servers/{server_id}/availability and the
-- lists' ratios) reads one server's transitions in a window of time, by
-- time and then commit order (position), and the last one before the window: an index
-- range scan of (tenant_id, server_id, occurred_at, position) that carries
-- to_status, so that the read is index-only and needs no sort.
CREATE INDEX mcp_audit_events_availability_idx
    ON mcp_audit_events (tenant_id, server_id, occurred_at, position) INCLUDE (to_status);
