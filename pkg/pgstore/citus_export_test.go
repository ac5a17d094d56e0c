package pgstore

// RegisterSQL is the registration's one statement, for the test that Citus
// hands it to the worker of the tenant's shard.
const RegisterSQL = registerSQL
