DROP TABLE IF EXISTS mcp_skills;
-- The role is left in place: it is cluster-wide and other databases of the
-- cluster may still use it.
