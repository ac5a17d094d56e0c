-- The functions stay as the last migrate up left them, which at this
-- version are those that 0001-0021 define, but for the ones that came with
-- this migration as files of functions/ alone.
DROP FUNCTION IF EXISTS mcp_register(uuid, uuid, text, text, text[], jsonb, text, jsonb, text, text, text[], text[],
    integer, timestamptz);
DROP TABLE IF EXISTS mcp_schema_functions;
