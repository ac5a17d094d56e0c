-- On Citus the sweep records when it ended (functions/mcp_sweep_ended.sql)
-- beside when it began, and the next sweep counts the blind window's gap
-- from that end (functions/mcp_sweep_slack.sql): a sweep that ran to its
-- time limit is a slow sweep, not a registry that saw nothing.
ALTER TABLE mcp_monitor_state ADD COLUMN last_sweep_end TIMESTAMPTZ;
