package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// MinSecretBytes is the length of the shortest HMAC secret accepted: RFC
// 7518 section 3.2 asks for a key at least as long as the hash output for
// HS256.
const MinSecretBytes = 32

// issuedClaims is the JSON shape of the claims of a token Issue makes.
type issuedClaims struct {
	TenantID *string `json:"tenant_id,omitempty"`
	Scope    *string `json:"scope,omitempty"`
	jwt.RegisteredClaims
}

// Issue returns an HS256 token for tenant, signed with secret, that carries
// subject (omitted when empty) and scope and expires ttl after now.
func Issue(secret []byte, tenant uuid.UUID, subject, scope string, ttl time.Duration, now time.Time) (string, error) {
	if len(secret) < MinSecretBytes {
		return "", fmt.Errorf("issue token: secret shorter than %d bytes", MinSecretBytes)
	}
	if tenant == uuid.Nil {
		return "", errors.New("issue token: nil tenant")
	}
	if ttl <= 0 {
		return "", fmt.Errorf("issue token: ttl %s is not positive", ttl)
	}
	if exp := now.Add(ttl).Truncate(time.Second); !exp.After(now) {
		return "", fmt.Errorf("issue token: ttl %s is below one second", ttl)
	}
	tenantID := tenant.String()
	claims := issuedClaims{
		TenantID: &tenantID,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   subject,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	if s := strings.Join(strings.Fields(scope), " "); s != "" {
		claims.Scope = &s
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("issue token: %w", err)
	}
	return signed, nil
}
