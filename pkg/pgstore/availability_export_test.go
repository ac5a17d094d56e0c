package pgstore

// The statements of the availability reads, for the benchmark's EXPLAIN.
var (
	ServerAvailabilitySQL = serverAvailabilitySQL
	AvailabilityRatiosSQL = availabilityRatiosSQL
)
