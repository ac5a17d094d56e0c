package pgstore

// InsertEventSQL is the registration's audit statement, for the test that
// Citus routes it to the tenant's shard.
const InsertEventSQL = insertEvent
