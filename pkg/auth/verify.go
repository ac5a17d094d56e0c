package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// ErrInvalidToken is wrapped by every verification failure.
var ErrInvalidToken = errors.New("invalid token")

// maxTokenBytes bounds the size of a token that Verify parses at all.
const maxTokenBytes = 8 << 10

// minRSABits is the smallest RSA modulus taken from a JWKS.
const minRSABits = 2048

// Algorithms Verify accepts, each with its own key source.
const (
	algHS256 = "HS256"
	algRS256 = "RS256"
	algES256 = "ES256"
	algEdDSA = "EdDSA"
)

// knownAlgs are the JWS algorithm names an error message may repeat; any
// other header value is not echoed.
var knownAlgs = []string{
	"none", "HS256", "HS384", "HS512", "RS256", "RS384", "RS512",
	"ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "EdDSA", "Ed25519",
}

// Reasons returned by the key lookup, so that the error says why.
var (
	errAlgNotAccepted = errors.New("algorithm not accepted")
	errBadKid         = errors.New("kid header is not a string")
	errUnknownKid     = errors.New("no key matches the kid header")
	errNoKey          = errors.New("no key for the algorithm")
)

// VerifierOptions configures NewVerifier. At least one of HMACSecret and
// JWKS is required.
type VerifierOptions struct {
	// HMACSecret verifies HS256 tokens; at least 32 bytes when set.
	HMACSecret []byte
	// JWKS is a JSON Web Key Set whose public keys verify RS256, ES256 and
	// EdDSA tokens.
	JWKS []byte
	// Now is the clock for exp and nbf; nil means time.Now.
	Now func() time.Time
	// Leeway is the clock skew allowed on exp and nbf; zero by default.
	Leeway time.Duration
	// CacheSize bounds how many verified tokens are remembered, each for
	// at most TokenCacheTTL and never past its exp; 0 means
	// DefaultTokenCacheSize, a negative value remembers none.
	CacheSize int
}

// Remembering verified tokens: a server sends the same token with every
// heartbeat, and parsing it and checking its signature is a fifth of mcpd's
// CPU per heartbeat (docs/performance.md).
const (
	// DefaultTokenCacheSize is how many verified tokens a Verifier
	// remembers unless told otherwise.
	DefaultTokenCacheSize = 16384
	// TokenCacheTTL bounds how long a verified token is taken without
	// being verified again.
	TokenCacheTTL = 30 * time.Second
)

// publicKey is one usable key of a JWKS and the one algorithm it verifies.
type publicKey struct {
	kid string
	alg string
	key any
}

// Verifier checks mcpd bearer tokens. It is safe for concurrent use.
type Verifier struct {
	secret []byte
	keys   []publicKey
	algs   []string
	parser *jwt.Parser
	now    func() time.Time
	leeway time.Duration
	cache  *tokenCache // nil: remember nothing
}

// NewVerifier returns a Verifier for the configured key sources. It fails
// when neither source is given, when the secret is too short, or when the
// JWKS cannot be parsed or holds no usable signing key.
func NewVerifier(opts VerifierOptions) (*Verifier, error) {
	if len(opts.HMACSecret) == 0 && len(opts.JWKS) == 0 {
		return nil, errors.New("new verifier: neither hmac secret nor jwks given")
	}
	if opts.Leeway < 0 {
		return nil, fmt.Errorf("new verifier: negative leeway %s", opts.Leeway)
	}
	v := &Verifier{}
	if len(opts.HMACSecret) > 0 {
		if len(opts.HMACSecret) < MinSecretBytes {
			return nil, fmt.Errorf("new verifier: hmac secret shorter than %d bytes", MinSecretBytes)
		}
		v.secret = slices.Clone(opts.HMACSecret)
		v.algs = append(v.algs, algHS256)
	}
	if len(opts.JWKS) > 0 {
		keys, err := parseJWKS(opts.JWKS)
		if err != nil {
			return nil, fmt.Errorf("new verifier: %w", err)
		}
		v.keys = keys
		for _, k := range keys {
			if !slices.Contains(v.algs, k.alg) {
				v.algs = append(v.algs, k.alg)
			}
		}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	v.now, v.leeway = now, opts.Leeway
	switch {
	case opts.CacheSize == 0:
		v.cache = newTokenCache(DefaultTokenCacheSize)
	case opts.CacheSize > 0:
		v.cache = newTokenCache(opts.CacheSize)
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(v.algs),
		jwt.WithTimeFunc(now),
		jwt.WithLeeway(opts.Leeway),
		jwt.WithExpirationRequired(),
		jwt.WithStrictDecoding(),
	)
	return v, nil
}

// LoadVerifier reads the HMAC secret file (see ReadSecretFile) and the JWKS
// file, either of which may be "", and returns a Verifier for them.
func LoadVerifier(secretFile, jwksFile string) (*Verifier, error) {
	var opts VerifierOptions
	if secretFile != "" {
		secret, err := ReadSecretFile(secretFile)
		if err != nil {
			return nil, fmt.Errorf("load verifier: %w", err)
		}
		opts.HMACSecret = secret
	}
	if jwksFile != "" {
		b, err := readKeyFile(jwksFile)
		if err != nil {
			return nil, fmt.Errorf("load verifier: read jwks file: %w", err)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("load verifier: jwks file %s is empty", jwksFile)
		}
		opts.JWKS = b
	}
	v, err := NewVerifier(opts)
	if err != nil {
		return nil, fmt.Errorf("load verifier: %w", err)
	}
	return v, nil
}

// Verify checks the token's size, algorithm, signature, exp and tenant_id,
// and returns its claims. Every failure wraps ErrInvalidToken.
func (v *Verifier) Verify(token string) (Claims, error) {
	if token == "" {
		return Claims{}, fmt.Errorf("%w: empty", ErrInvalidToken)
	}
	if len(token) > maxTokenBytes {
		return Claims{}, fmt.Errorf("%w: larger than %d bytes", ErrInvalidToken, maxTokenBytes)
	}
	var digest [sha256.Size]byte
	if v.cache != nil {
		digest = sha256.Sum256([]byte(token))
		if c, ok := v.cache.get(digest, v.now()); ok {
			return c, nil
		}
	}
	c, err := v.verify(token)
	if err == nil && v.cache != nil {
		now := v.now()
		until := now.Add(TokenCacheTTL)
		if exp := c.ExpiresAt.Add(v.leeway); exp.Before(until) {
			until = exp
		}
		v.cache.put(digest, c, until, now)
	}
	return c, err
}

// verify checks the token, as Verify does, without the cache. The header
// and claims are read strictly first (checkToken); the jwt library then
// checks the algorithm, the signature and the times of the claims so read.
func (v *Verifier) verify(token string) (Claims, error) {
	tc, err := checkToken(token)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %s", ErrInvalidToken, err)
	}
	parsed, err := v.parser.ParseWithClaims(token, &parsedClaims{c: &tc}, v.key)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %s", ErrInvalidToken, v.reason(parsed, err))
	}
	if tc.TenantID == nil {
		return Claims{}, fmt.Errorf("%w: tenant_id missing", ErrInvalidToken)
	}
	tenant, err := parseTenant(*tc.TenantID)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %s", ErrInvalidToken, err)
	}
	c := Claims{
		TenantID:  tenant,
		Subject:   tc.Subject,
		ExpiresAt: tc.ExpiresAt.UTC(),
	}
	if tc.Scope != nil {
		for _, s := range strings.Fields(*tc.Scope) {
			if !slices.Contains(c.Scopes, s) {
				c.Scopes = append(c.Scopes, s)
			}
		}
	}
	return c, nil
}

// parseTenant accepts the canonical 36-character form of a non-nil UUID.
func parseTenant(s string) (uuid.UUID, error) {
	if len(s) != 36 {
		return uuid.Nil, errors.New("tenant_id is not a uuid")
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, errors.New("tenant_id is not a uuid")
	}
	if id == uuid.Nil {
		return uuid.Nil, errors.New("tenant_id is the nil uuid")
	}
	return id, nil
}

// key finds the verification key for a parsed, not yet verified token.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if !slices.Contains(v.algs, alg) {
		return nil, errAlgNotAccepted
	}
	if alg == algHS256 {
		return v.secret, nil
	}
	rawKid, hasKid := t.Header["kid"]
	kid, ok := rawKid.(string)
	if hasKid && !ok {
		return nil, errBadKid
	}
	var set jwt.VerificationKeySet
	for _, k := range v.keys {
		if k.alg == alg && (!hasKid || k.kid == kid) {
			set.Keys = append(set.Keys, k.key)
		}
	}
	if len(set.Keys) == 0 {
		if hasKid {
			return nil, errUnknownKid
		}
		return nil, errNoKey
	}
	return set, nil
}

// reason says why the parser refused a token, without repeating its content.
func (v *Verifier) reason(t *jwt.Token, err error) string {
	for _, e := range []error{errAlgNotAccepted, errBadKid, errUnknownKid, errNoKey} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// The header names an algorithm the jwt library does not know.
		return algMessage(t)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		// The parser refuses an algorithm outside v.algs the same way it
		// refuses a bad signature.
		if t != nil && t.Method != nil && !slices.Contains(v.algs, t.Method.Alg()) {
			return algMessage(t)
		}
		return "signature invalid"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "exp missing"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "not valid yet"
	}
	return "claims invalid"
}

// algMessage names the token's algorithm when it is a standard one.
func algMessage(t *jwt.Token) string {
	if t != nil {
		if alg, ok := t.Header["alg"].(string); ok && slices.Contains(knownAlgs, alg) {
			return fmt.Sprintf("algorithm %s not accepted", alg)
		}
	}
	return "algorithm not accepted"
}

// tokenCache remembers the claims of verified tokens by the token's SHA-256,
// each until a time no later than the token's expiry. Only tokens that
// verified are remembered: a bad token is verified, and refused, every time.
type tokenCache struct {
	mu      sync.Mutex
	max     int
	entries map[[sha256.Size]byte]cachedClaims
}

type cachedClaims struct {
	claims Claims
	until  time.Time
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{max: size, entries: make(map[[sha256.Size]byte]cachedClaims)}
}

func (c *tokenCache) get(digest [sha256.Size]byte, now time.Time) (Claims, bool) {
	c.mu.Lock()
	e, ok := c.entries[digest]
	if ok && !now.Before(e.until) {
		delete(c.entries, digest)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return Claims{}, false
	}
	claims := e.claims
	claims.Scopes = slices.Clone(e.claims.Scopes)
	return claims, true
}

// put remembers claims until until. When the cache is full it first drops
// what has expired, then arbitrary entries.
func (c *tokenCache) put(digest [sha256.Size]byte, claims Claims, until, now time.Time) {
	if !now.Before(until) {
		return
	}
	claims.Scopes = slices.Clone(claims.Scopes)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[digest]; !ok && len(c.entries) >= c.max {
		for k, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[digest] = cachedClaims{claims: claims, until: until}
}

// len reports how many tokens the cache holds.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
