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
