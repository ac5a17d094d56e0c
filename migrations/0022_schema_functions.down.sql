-- The functions stay as the last migrate up left them, which at this
-- version are those that 0001-0021 define.
DROP TABLE IF EXISTS mcp_schema_functions;
