package auth

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// Scopes understood by the mcpd API.
const (
	// ScopeRead allows every GET of the API.
	ScopeRead = "mcp:read"
	// ScopeWrite allows register, heartbeat and deregister, and every GET.
	ScopeWrite = "mcp:write"
)

// Claims is what a verified token says about its bearer.
type Claims struct {
	// TenantID is the tenant the bearer acts for; never uuid.Nil once verified.
	TenantID uuid.UUID
	// Subject is the token's sub claim, empty when absent.
	Subject string
	// Scopes are the distinct entries of the scope claim, in token order.
	Scopes []string
	// ExpiresAt is the token's exp claim, in UTC.
	ExpiresAt time.Time
}

// HasScope reports whether the claims carry exactly the given scope.
func (c Claims) HasScope(scope string) bool {
	return slices.Contains(c.Scopes, scope)
}

// CanRead reports whether the claims allow a read (mcp:read or mcp:write).
func (c Claims) CanRead() bool {
	return c.HasScope(ScopeRead) || c.HasScope(ScopeWrite)
}

// CanWrite reports whether the claims allow a write (mcp:write).
func (c Claims) CanWrite() bool {
	return c.HasScope(ScopeWrite)
}
