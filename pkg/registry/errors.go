package registry

import "errors"

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
