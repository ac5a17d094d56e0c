-- Statements that Citus can run (issue 30).

-- mcp_set_tenant scopes the current transaction to p_tenant: SET LOCAL
-- auth.tenant_id, which row-level security reads. Citus carries SET LOCAL
-- to the workers (with citus.propagate_set_commands = local, set here for
-- the transaction), a set_config it does not; on plain PostgreSQL the
-- citus setting is an unused placeholder. Called in explicit transactions
-- only: outside one, SET LOCAL does nothing.
CREATE FUNCTION mcp_set_tenant(p_tenant uuid)
RETURNS void
LANGUAGE plpgsql
AS $fn$
BEGIN
    SET LOCAL citus.propagate_set_commands TO 'local';
    EXECUTE format('SET LOCAL auth.tenant_id TO %L', p_tenant::text);
END
$fn$;
REVOKE ALL ON FUNCTION mcp_set_tenant(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_set_tenant(uuid) TO cyberos_app;

-- mcp_now is p_now, or the transaction's time when it is NULL (the tests'
-- clock, or the database's): a function of its own, which Citus evaluates
-- on the coordinator, where it refuses now() inside COALESCE or CASE of a
-- distributed statement.
CREATE FUNCTION mcp_now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
AS $fn$
BEGIN
    RETURN COALESCE(p_now, now());
END
$fn$;
GRANT EXECUTE ON FUNCTION mcp_now(timestamptz) TO cyberos_app;

-- mcp_feed_next runs as its caller: on Citus, a transaction that changed a
-- shard as cyberos_app cannot touch it again as another role (a SECURITY
-- DEFINER function's owner). The app takes its own tenant's positions,
-- which row-level security confines it to.
ALTER FUNCTION mcp_feed_next(uuid, text, text) SECURITY INVOKER;
GRANT INSERT, UPDATE (position, alert_position) ON mcp_tenant_feed TO cyberos_app;
