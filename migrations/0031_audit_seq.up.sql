-- The functions that write one audit event with INSERT ... VALUES take its
-- seq from mcp_audit_seq (functions/mcp_audit_seq.sql) and its event id
-- into variables, so that Citus keeps the INSERT's plan on the worker. No
-- table changes: the function's file creates it, and the down drops it.
SELECT 1;
