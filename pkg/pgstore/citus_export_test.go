package pgstore

// InsertEventSQL and UpsertSkills are the registration's audit and skills
// statements, for the test that Citus routes them to the tenant's shard.
const InsertEventSQL = insertEvent

// UpsertSkills is upsertSkills.
var UpsertSkills = upsertSkills
