package registry

import (
	"errors"
	"fmt"
)

// Errors callers branch on. The API maps them to problems.
var (
	// ErrNotFound: no such server for this tenant (another tenant's server is
	// not found too).
	ErrNotFound = errors.New("server not found")
	// ErrDeregistered: the server is deregistered and must register again.
	ErrDeregistered = errors.New("server is deregistered")
	// ErrUnavailable: the store cannot answer now; the call may be retried.
	ErrUnavailable = errors.New("store unavailable")
	// ErrQuotaExceeded: registering a new module would take the tenant past
	// its quota of servers that are not deregistered.
	ErrQuotaExceeded = errors.New("tenant server quota exceeded")
)

// PartialError is a call across tenants that did its work for some and
// failed for the others: on Citus, the tenants of a worker that is down.
// The tenants it failed for are as a database outage leaves them; the
// others are served.
type PartialError struct {
	// Failed and Tenants count the tenants the call failed for and those
	// it tried.
	Failed, Tenants int
	// Err is the first failure.
	Err error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("%d of %d tenants: %v", e.Failed, e.Tenants, e.Err)
}

func (e *PartialError) Unwrap() error { return e.Err }
