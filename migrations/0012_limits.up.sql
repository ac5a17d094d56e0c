-- The size of each server's capability advertisement, as the API sends it
-- (its JSON text), so that a page of servers can be bounded by bytes as
-- well as by count without reading the payloads it will not send: a
-- running sum over this column stops the page (pgstore Servers).
--
-- A trigger keeps it from capability_advertisement on every write of that
-- column; the app never sets it. Heartbeats and sweeps do not write the
-- advertisement, so they do not fire the trigger.
ALTER TABLE mcp_servers ADD COLUMN capability_bytes integer NOT NULL DEFAULT 0;

UPDATE mcp_servers SET capability_bytes = octet_length(capability_advertisement::text)
WHERE capability_advertisement IS NOT NULL;

CREATE FUNCTION mcp_servers_capability_bytes() RETURNS trigger
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $$
BEGIN
    NEW.capability_bytes := COALESCE(octet_length(NEW.capability_advertisement::text), 0);
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION mcp_servers_capability_bytes() FROM PUBLIC;

CREATE TRIGGER mcp_servers_capability_bytes
    BEFORE INSERT OR UPDATE OF capability_advertisement ON mcp_servers
    FOR EACH ROW EXECUTE FUNCTION mcp_servers_capability_bytes();

-- The live (not deregistered) servers of each tenant, for the quota of
-- servers (--tenant-max-servers): a registration of a new module locks its
-- tenant's row, reads the count and inserts, so that concurrent
-- registrations never exceed the quota and the check costs the same at any
-- tenant size. A trigger keeps the count from mcp_servers, whatever writes
-- it; only a change into or out of 'deregistered' fires it (a heartbeat or a
-- sweep never does).
CREATE TABLE mcp_tenant_servers (
    tenant_id UUID PRIMARY KEY,
    live      INTEGER NOT NULL CHECK (live >= 0)
);

INSERT INTO mcp_tenant_servers (tenant_id, live)
SELECT tenant_id, count(*) FILTER (WHERE status <> 'deregistered') FROM mcp_servers GROUP BY tenant_id;

ALTER TABLE mcp_tenant_servers ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_servers_rls ON mcp_tenant_servers
    USING (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid);
GRANT SELECT, INSERT ON mcp_tenant_servers TO cyberos_app;
GRANT UPDATE (live) ON mcp_tenant_servers TO cyberos_app;

CREATE FUNCTION mcp_servers_count_live() RETURNS trigger
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $$
DECLARE
    v_delta integer := CASE WHEN NEW.status = 'deregistered' THEN -1 ELSE 1 END;
BEGIN
    INSERT INTO mcp_tenant_servers AS t (tenant_id, live) VALUES (NEW.tenant_id, GREATEST(v_delta, 0))
    ON CONFLICT (tenant_id) DO UPDATE SET live = t.live + v_delta;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION mcp_servers_count_live() FROM PUBLIC;

CREATE TRIGGER mcp_servers_count_live_insert
    AFTER INSERT ON mcp_servers
    FOR EACH ROW WHEN (NEW.status <> 'deregistered')
    EXECUTE FUNCTION mcp_servers_count_live();
CREATE TRIGGER mcp_servers_count_live_update
    AFTER UPDATE OF status ON mcp_servers
    FOR EACH ROW WHEN ((OLD.status = 'deregistered') <> (NEW.status = 'deregistered'))
    EXECUTE FUNCTION mcp_servers_count_live();
