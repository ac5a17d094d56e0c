-- From here on the SQL functions live in migrations/functions/, one file
-- each (the first new one: mcp_register), which migrate up applies after
-- the numbered migrations. This row
-- says which set a database has: a build whose set differs reports not
-- ready until its own migrate up has run (pgstore.CheckSchema).
CREATE TABLE mcp_schema_functions (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    digest text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT ON mcp_schema_functions TO cyberos_app;
