package apiwire

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Problem is an RFC 9457 problem details object, the body of every error.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance,omitempty"`
	// Field names the input that broke a rule, for validation problems.
	Field string `json:"field,omitempty"`
	// RetryAfter is the server's Retry-After, when it sent one (not in JSON).
	RetryAfter time.Duration `json:"-"`
}

// Error returns the title and detail, as mcpctl prints them.
func (p *Problem) Error() string {
	if p.Detail == "" {
		return fmt.Sprintf("%s (%d)", p.Title, p.Status)
	}
	return fmt.Sprintf("%s: %s", p.Title, p.Detail)
}

// Problem types: the stable set of "type" URIs that mcpd answers with. A
// client branches on the type, never on the title or detail.
const (
	ProblemTypeBase = "https://mcpd.dev/problems/"

	// ProblemValidation (400): an input breaks a rule of the contract; the
	// problem's field names it.
	ProblemValidation = ProblemTypeBase + "validation"
	// ProblemMalformed (400): the body is not one JSON object (empty, not
	// JSON, trailing data).
	ProblemMalformed = ProblemTypeBase + "malformed-body"
	// ProblemUnauthorized (401): no bearer token, or a bad or expired one.
	ProblemUnauthorized = ProblemTypeBase + "unauthorized"
	// ProblemForbidden (403): the token lacks the scope the call needs.
	ProblemForbidden = ProblemTypeBase + "forbidden"
	// ProblemNotFound (404): no such server for the token's tenant, or no
	// such route.
	ProblemNotFound = ProblemTypeBase + "not-found"
	// ProblemMethodNotAllowed (405): the route exists for other methods.
	ProblemMethodNotAllowed = ProblemTypeBase + "method-not-allowed"
	// ProblemDeregistered (409): the server is deregistered and must
	// register again.
	ProblemDeregistered = ProblemTypeBase + "deregistered"
	// ProblemTooLarge (413): the body is larger than the server's limit
	// (256 KiB).
	ProblemTooLarge = ProblemTypeBase + "payload-too-large"
	// ProblemUnsupportedMediaType (415): the body is not application/json.
	ProblemUnsupportedMediaType = ProblemTypeBase + "unsupported-media-type"
	// ProblemInternal (500): a fault of mcpd; the cause is in its log.
	ProblemInternal = ProblemTypeBase + "internal"
	// ProblemUnavailable (503): the store cannot answer now; retry after
	// the Retry-After header.
	ProblemUnavailable = ProblemTypeBase + "unavailable"
	// ProblemQuotaExceeded (403): registering a new module would take the
	// tenant past its quota of servers (--tenant-max-servers).
	ProblemQuotaExceeded = ProblemTypeBase + "quota-exceeded"
	// ProblemRateLimited (429): the tenant is past its request rate
	// (--tenant-rate-limit, --tenant-rate-burst) or its concurrent watch
	// streams (--tenant-max-watches); retry after the Retry-After header.
	ProblemRateLimited = ProblemTypeBase + "rate-limited"
	// ProblemCursorExpired (410): the position can no longer be resumed
	// from; list again and watch from the list's watch_cursor.
	ProblemCursorExpired = ProblemTypeBase + "cursor-expired"
)

// The contract's Retry-After of a 503, in whole seconds: drawn from this
// range for each answer, so that a fleet refused at once does not come
// back at once.
const (
	RetryAfterMinSeconds = 1
	RetryAfterMaxSeconds = 3
)

// UnavailableRetryAfter is the Retry-After of one 503, in whole seconds.
func UnavailableRetryAfter() int {
	return RetryAfterMinSeconds + rand.IntN(RetryAfterMaxSeconds-RetryAfterMinSeconds+1)
}
