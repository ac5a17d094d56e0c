-- Applied by migrate up after the numbered migrations: migrations/embed.go.
--
-- The next seq of mcp_audit_events (its identity's sequence), for the
-- functions that write one event with INSERT ... VALUES: they take the seq
-- and the event id into variables first and insert them with OVERRIDING
-- SYSTEM VALUE, so that the INSERT holds no volatile call (the identity's
-- nextval, gen_random_uuid). On Citus the worker then keeps the INSERT's
-- plan for the tenant's shard, as for the function's other statements,
-- instead of planning it again at every call: a registration on the
-- worker 0.9-1.2 ms before, 0.65-0.8 ms after (pgbench, one client,
-- 2026-12-06). As its owner: mcpd's role may not call nextval on the
-- sequence, and a grant on it does not reach Citus's workers.
CREATE OR REPLACE FUNCTION mcp_audit_seq()
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    RETURN nextval('mcp_audit_events_seq_seq');
END
$function$;

REVOKE ALL ON FUNCTION mcp_audit_seq() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_audit_seq() TO cyberos_app;
