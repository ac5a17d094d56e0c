package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
)

// testNow is the fixed clock of every verifier in these tests.
var testNow = time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)

var testTenant = uuid.MustParse("0b6e4f3a-8c1d-4f2e-9a7b-3c5d6e7f8a9b")

// fixture holds keys generated once per test binary (RSA generation is slow
// under -race).
type fixture struct {
	secret   []byte
	rsa      *rsa.PrivateKey
	rsaOther *rsa.PrivateKey // in the JWKS too, under kid rsa-2
	rsaStray *rsa.PrivateKey // in no JWKS
	ec       *ecdsa.PrivateKey
	ecStray  *ecdsa.PrivateKey
	ed       ed25519.PrivateKey
	edStray  ed25519.PrivateKey
	jwks     []byte
}

var fixtureOnce = sync.OnceValues(func() (*fixture, error) {
	f := &fixture{secret: make([]byte, 32)}
	if _, err := rand.Read(f.secret); err != nil {
		return nil, err
	}
	var err error
	for _, k := range []**rsa.PrivateKey{&f.rsa, &f.rsaOther, &f.rsaStray} {
		if *k, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			return nil, err
		}
	}
	for _, k := range []**ecdsa.PrivateKey{&f.ec, &f.ecStray} {
		if *k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, err
		}
	}
	for _, k := range []*ed25519.PrivateKey{&f.ed, &f.edStray} {
		if _, *k, err = ed25519.GenerateKey(rand.Reader); err != nil {
			return nil, err
		}
	}
	f.jwks, err = jwksOf(
		testJWK{Key: &f.rsa.PublicKey, KeyID: "rsa-1", Algorithm: "RS256", Use: "sig"},
		testJWK{Key: &f.rsaOther.PublicKey, KeyID: "rsa-2"},
		testJWK{Key: &f.ec.PublicKey, KeyID: "ec-1", Algorithm: "ES256"},
		testJWK{Key: f.ed.Public(), KeyID: "ed-1", Algorithm: "EdDSA"},
	)
	return f, err
})

func setup(t testing.TB) *fixture {
	t.Helper()
	f, err := fixtureOnce()
	if err != nil {
		t.Fatalf("generate keys: %v", err)
	}
	return f
}

func newVerifier(t testing.TB, opts VerifierOptions) *Verifier {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return testNow }
	}
	v, err := NewVerifier(opts)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

// claims returns valid claims for testTenant, changed by the edits.
func claims(edits ...func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{
		"tenant_id": testTenant.String(),
		"sub":       "agent-7",
		"scope":     "mcp:read mcp:write",
		"exp":       testNow.Add(time.Hour).Unix(),
	}
	for _, e := range edits {
		e(c)
	}
	return c
}

func sign(t testing.TB, m jwt.SigningMethod, key any, kid any, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != nil {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", m.Alg(), err)
	}
	return s
}

// unsigned returns a token with the given header and claims and signature.
func unsigned(t testing.TB, header map[string]any, c jwt.MapClaims, sig string) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(p) + "." + sig
}

func rsaPublicPEM(t testing.TB, k *rsa.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestVerify(t *testing.T) {
	t.Parallel()
	f := setup(t)
	both := newVerifier(t, VerifierOptions{HMACSecret: f.secret, JWKS: f.jwks})
	hmacOnly := newVerifier(t, VerifierOptions{HMACSecret: f.secret})
	jwksOnly := newVerifier(t, VerifierOptions{JWKS: f.jwks})
	lenient := newVerifier(t, VerifierOptions{HMACSecret: f.secret, Leeway: 10 * time.Second})

	hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, f.secret, nil, c) }
	noExp := claims(func(c jwt.MapClaims) { delete(c, "exp") })

	tests := []struct {
		name   string
		v      *Verifier
		token  string
		reason string // "" means accepted
	}{
		{"hs256", both, hs(claims()), ""},
		{"hs256 hmac only", hmacOnly, hs(claims()), ""},
		{"hs256 jwks only", jwksOnly, hs(claims()), "algorithm HS256 not accepted"},
		{"hs256 wrong secret", both, sign(t, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), nil, claims()), "signature invalid"},
		{"hs384 refused", both, sign(t, jwt.SigningMethodHS384, f.secret, nil, claims()), "algorithm HS384 not accepted"},

		{"rs256 kid", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsa, "rsa-1", claims()), ""},
		{"rs256 both", both, sign(t, jwt.SigningMethodRS256, f.rsa, "rsa-1", claims()), ""},
		{"rs256 no kid first key", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsa, nil, claims()), ""},
		{"rs256 no kid second key", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsaOther, nil, claims()), ""},
		{"rs256 hmac only", hmacOnly, sign(t, jwt.SigningMethodRS256, f.rsa, "rsa-1", claims()), "algorithm RS256 not accepted"},
		{"rs256 stray key no kid", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsaStray, nil, claims()), "signature invalid"},
		{"rs256 stray key under kid", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsaStray, "rsa-1", claims()), "signature invalid"},
		{"rs256 kid of other rsa key", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsa, "rsa-2", claims()), "signature invalid"},
		{"ps256 refused", jwksOnly, sign(t, jwt.SigningMethodPS256, f.rsa, "rsa-1", claims()), "algorithm PS256 not accepted"},

		{"es256 kid", jwksOnly, sign(t, jwt.SigningMethodES256, f.ec, "ec-1", claims()), ""},
		{"es256 no kid", both, sign(t, jwt.SigningMethodES256, f.ec, nil, claims()), ""},
		{"es256 hmac only", hmacOnly, sign(t, jwt.SigningMethodES256, f.ec, nil, claims()), "algorithm ES256 not accepted"},
		{"es256 stray key", jwksOnly, sign(t, jwt.SigningMethodES256, f.ecStray, "ec-1", claims()), "signature invalid"},

		{"eddsa kid", jwksOnly, sign(t, jwt.SigningMethodEdDSA, f.ed, "ed-1", claims()), ""},
		{"eddsa no kid", both, sign(t, jwt.SigningMethodEdDSA, f.ed, nil, claims()), ""},
		{"eddsa hmac only", hmacOnly, sign(t, jwt.SigningMethodEdDSA, f.ed, nil, claims()), "algorithm EdDSA not accepted"},
		{"eddsa stray key", jwksOnly, sign(t, jwt.SigningMethodEdDSA, f.edStray, nil, claims()), "signature invalid"},

		{"kid unknown", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsa, "rsa-9", claims()), "no key matches the kid header"},
		{"kid of an ec key on rs256", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsa, "ec-1", claims()), "no key matches the kid header"},
		{"kid of an rsa key on eddsa", jwksOnly, sign(t, jwt.SigningMethodEdDSA, f.ed, "rsa-1", claims()), "no key matches the kid header"},
		{"kid not a string", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsa, 1, claims()), "kid header is not a string"},

		{"alg none", both, sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil, claims()), "algorithm none not accepted"},
		{"alg none hmac only", hmacOnly, sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil, claims()), "algorithm none not accepted"},
		{"alg None spelled", both, unsigned(t, map[string]any{"alg": "None", "typ": "JWT"}, claims(), ""), "algorithm not accepted"},
		{"alg missing", both, unsigned(t, map[string]any{"typ": "JWT"}, claims(), "c2ln"), "algorithm not accepted"},
		{"confusion pem jwks only", jwksOnly, sign(t, jwt.SigningMethodHS256, rsaPublicPEM(t, &f.rsa.PublicKey), "rsa-1", claims()), "algorithm HS256 not accepted"},
		{"confusion pem both", both, sign(t, jwt.SigningMethodHS256, rsaPublicPEM(t, &f.rsa.PublicKey), "rsa-1", claims()), "signature invalid"},
		{"confusion jwks bytes", both, sign(t, jwt.SigningMethodHS256, f.jwks, nil, claims()), "signature invalid"},

		{"expired", both, hs(claims(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-time.Second).Unix() })), "expired"},
		{"exp equals now", both, hs(claims(func(c jwt.MapClaims) { c["exp"] = testNow.Unix() })), "expired"},
		{"expired within leeway", lenient, hs(claims(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-5 * time.Second).Unix() })), ""},
		{"expired beyond leeway", lenient, hs(claims(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-11 * time.Second).Unix() })), "expired"},
		{"exp missing", both, hs(noExp), "exp missing"},
		{"exp missing rs256", jwksOnly, sign(t, jwt.SigningMethodRS256, f.rsa, "rsa-1", noExp), "exp missing"},
		{"exp null", both, hs(claims(func(c jwt.MapClaims) { c["exp"] = nil })), "exp missing"},
		{"exp string", both, hs(claims(func(c jwt.MapClaims) { c["exp"] = "tomorrow" })), "exp is not a number"},
		{"nbf future", both, hs(claims(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(time.Minute).Unix() })), "not valid yet"},

		{"tenant missing", both, hs(claims(func(c jwt.MapClaims) { delete(c, "tenant_id") })), "tenant_id missing"},
		{"tenant null", both, hs(claims(func(c jwt.MapClaims) { c["tenant_id"] = nil })), "tenant_id missing"},
		{"tenant empty", both, hs(claims(func(c jwt.MapClaims) { c["tenant_id"] = "" })), "tenant_id is not a uuid"},
		{"tenant malformed", both, hs(claims(func(c jwt.MapClaims) { c["tenant_id"] = "acme" })), "tenant_id is not a uuid"},
		{"tenant bad hex", both, hs(claims(func(c jwt.MapClaims) { c["tenant_id"] = "0b6e4f3a-8c1d-4f2e-9a7b-3c5d6e7f8a9z" })), "tenant_id is not a uuid"},
		{"tenant without dashes", both, hs(claims(func(c jwt.MapClaims) { c["tenant_id"] = strings.ReplaceAll(testTenant.String(), "-", "") })), "tenant_id is not a uuid"},
		{"tenant urn form", both, hs(claims(func(c jwt.MapClaims) { c["tenant_id"] = testTenant.URN() })), "tenant_id is not a uuid"},
		{"tenant nil uuid", both, hs(claims(func(c jwt.MapClaims) { c["tenant_id"] = uuid.Nil.String() })), "tenant_id is the nil uuid"},
		{"tenant number", both, hs(claims(func(c jwt.MapClaims) { c["tenant_id"] = 42 })), "tenant_id is not a string"},
		{"tenant upper case", both, hs(claims(func(c jwt.MapClaims) { c["tenant_id"] = strings.ToUpper(testTenant.String()) })), ""},

		{"scope array", both, hs(claims(func(c jwt.MapClaims) { c["scope"] = []string{"mcp:read"} })), "scope is not a string"},
		{"sub number", both, hs(claims(func(c jwt.MapClaims) { c["sub"] = 7 })), "sub is not a string"},

		{"empty", both, "", "empty"},
		{"one segment", both, "abc", "malformed"},
		{"garbage segments", both, "a.b.c", "malformed"},
		{"four segments", both, hs(claims()) + ".x", "malformed"},
		{"padded base64", both, strings.Replace(hs(claims()), ".", "==.", 1), "malformed"},
		{"tampered payload", both, tamper(t, hs(claims()), testNow.Add(48*time.Hour)), "signature invalid"},
		{"signature stripped", both, hs(claims())[:strings.LastIndex(hs(claims()), ".")+1], "signature invalid"},
		{"over 8 KiB", both, strings.Repeat("a", maxTokenBytes+1), "larger than 8192 bytes"},
		{"valid but over 8 KiB", both, sizedToken(t, f.secret, maxTokenBytes+1), "larger than 8192 bytes"},
		{"valid at 8 KiB", both, sizedToken(t, f.secret, maxTokenBytes), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := tt.v.Verify(tt.token)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if c.TenantID != testTenant {
					t.Fatalf("tenant = %s, want %s", c.TenantID, testTenant)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify accepted the token, want %q", tt.reason)
			}
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("error %v does not wrap ErrInvalidToken", err)
			}
			if want := "invalid token: " + tt.reason; err.Error() != want {
				t.Fatalf("error = %q, want %q", err.Error(), want)
			}
			if c.TenantID != uuid.Nil || c.Scopes != nil || !c.ExpiresAt.IsZero() {
				t.Fatalf("claims returned with an error: %+v", c)
			}
			for _, part := range strings.Split(tt.token, ".") {
				if len(part) >= 8 && strings.Contains(err.Error(), part) {
					t.Fatalf("error %q echoes the token", err)
				}
			}
		})
	}
}

// tamper replaces the exp of a signed token, keeping its signature.
func tamper(t *testing.T, token string, exp time.Time) string {
	t.Helper()
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	c["exp"] = exp.Unix()
	raw, err = json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

// sizedToken returns a valid HS256 token of exactly n bytes, padded by a
// filler claim and, since raw base64 never has a length of 4k+1, by a filler
// header.
func sizedToken(t *testing.T, secret []byte, n int) string {
	t.Helper()
	for extra := range 4 {
		for pad := n*3/4 - 400; pad < n; pad++ {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("p", pad) }))
			tok.Header["x"] = strings.Repeat("x", extra)
			s, err := tok.SignedString(secret)
			if err != nil {
				t.Fatal(err)
			}
			if len(s) == n {
				return s
			}
			if len(s) > n {
				break
			}
		}
	}
	t.Fatalf("no token of %d bytes", n)
	return ""
}

func TestVerifyClaims(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := newVerifier(t, VerifierOptions{HMACSecret: f.secret, JWKS: f.jwks})
	exp := testNow.Add(90 * time.Minute)

	tests := []struct {
		name    string
		edit    func(jwt.MapClaims)
		sub     string
		scopes  []string
		read    bool
		write   bool
		signRSA bool
	}{
		{"read and write", nil, "agent-7", []string{ScopeRead, ScopeWrite}, true, true, false},
		{"read only", func(c jwt.MapClaims) { c["scope"] = "mcp:read" }, "agent-7", []string{ScopeRead}, true, false, false},
		{"write only", func(c jwt.MapClaims) { c["scope"] = "mcp:write" }, "agent-7", []string{ScopeWrite}, true, true, true},
		{"scope absent", func(c jwt.MapClaims) { delete(c, "scope") }, "agent-7", nil, false, false, false},
		{"scope empty", func(c jwt.MapClaims) { c["scope"] = "" }, "agent-7", nil, false, false, false},
		{"scope blanks", func(c jwt.MapClaims) { c["scope"] = "   " }, "agent-7", nil, false, false, false},
		{"scope extra spaces and dupes", func(c jwt.MapClaims) { c["scope"] = "  mcp:read   openid mcp:read " }, "agent-7", []string{ScopeRead, "openid"}, true, false, false},
		{"scope similar names", func(c jwt.MapClaims) { c["scope"] = "mcp:writer mcp:Read mcp" }, "agent-7", []string{"mcp:writer", "mcp:Read", "mcp"}, false, false, false},
		{"sub absent", func(c jwt.MapClaims) { delete(c, "sub") }, "", []string{ScopeRead, ScopeWrite}, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := claims(func(c jwt.MapClaims) { c["exp"] = exp.Unix() })
			if tt.edit != nil {
				tt.edit(c)
			}
			tok := sign(t, jwt.SigningMethodHS256, f.secret, nil, c)
			if tt.signRSA {
				tok = sign(t, jwt.SigningMethodRS256, f.rsa, "rsa-1", c)
			}
			got, err := v.Verify(tok)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			want := Claims{TenantID: testTenant, Subject: tt.sub, Scopes: tt.scopes, ExpiresAt: exp}
			if got.TenantID != want.TenantID || got.Subject != want.Subject ||
				!slices.Equal(got.Scopes, want.Scopes) || !got.ExpiresAt.Equal(want.ExpiresAt) {
				t.Fatalf("claims = %+v, want %+v", got, want)
			}
			if got.ExpiresAt.Location() != time.UTC {
				t.Fatalf("ExpiresAt location = %s, want UTC", got.ExpiresAt.Location())
			}
			if got.CanRead() != tt.read || got.CanWrite() != tt.write {
				t.Fatalf("CanRead, CanWrite = %t, %t; want %t, %t", got.CanRead(), got.CanWrite(), tt.read, tt.write)
			}
		})
	}
}

func TestHasScope(t *testing.T) {
	t.Parallel()
	c := Claims{Scopes: []string{ScopeRead, "openid"}}
	for scope, want := range map[string]bool{ScopeRead: true, "openid": true, ScopeWrite: false, "": false, "mcp:read ": false} {
		if got := c.HasScope(scope); got != want {
			t.Errorf("HasScope(%q) = %t, want %t", scope, got, want)
		}
	}
	if (Claims{}).CanRead() || (Claims{}).CanWrite() {
		t.Error("empty claims allow something")
	}
}

func TestIssueRoundTrip(t *testing.T) {
	t.Parallel()
	f := setup(t)
	clock := clockwork.NewFakeClockAt(testNow)
	v := newVerifier(t, VerifierOptions{HMACSecret: f.secret, Now: clock.Now})

	issuedAt := testNow.Add(250 * time.Millisecond)
	tok, err := Issue(f.secret, testTenant, "ops@example.com", " mcp:read\tmcp:write ", time.Hour, issuedAt)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	got, err := v.Verify(tok)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := Claims{TenantID: testTenant, Subject: "ops@example.com", Scopes: []string{ScopeRead, ScopeWrite}, ExpiresAt: testNow.Add(time.Hour)}
	if got.TenantID != want.TenantID || got.Subject != want.Subject ||
		!slices.Equal(got.Scopes, want.Scopes) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("claims = %+v, want %+v", got, want)
	}

	payload := decodePayload(t, tok)
	if payload["scope"] != "mcp:read mcp:write" {
		t.Fatalf("scope claim = %q, want normalised", payload["scope"])
	}
	if _, ok := payload["iat"]; !ok {
		t.Fatal("iat claim missing")
	}
	header := decodeHeader(t, tok)
	if header["alg"] != "HS256" {
		t.Fatalf("alg = %v, want HS256", header["alg"])
	}

	clock.Advance(time.Hour - time.Second)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("Verify one second before exp: %v", err)
	}
	clock.Advance(time.Second)
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Verify at exp: %v, want expired", err)
	}
}

func TestIssueOmitsEmptyClaims(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tok, err := Issue(f.secret, testTenant, "", "", time.Minute, testNow)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	p := decodePayload(t, tok)
	for _, k := range []string{"sub", "scope"} {
		if _, ok := p[k]; ok {
			t.Errorf("claim %q present, want omitted", k)
		}
	}
	c, err := newVerifier(t, VerifierOptions{HMACSecret: f.secret}).Verify(tok)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if c.Subject != "" || c.Scopes != nil || c.CanRead() {
		t.Fatalf("claims = %+v, want no subject and no scopes", c)
	}
}

func TestIssueErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tests := []struct {
		name   string
		secret []byte
		tenant uuid.UUID
		ttl    time.Duration
	}{
		{"short secret", []byte("secret"), testTenant, time.Hour},
		{"no secret", nil, testTenant, time.Hour},
		{"nil tenant", f.secret, uuid.Nil, time.Hour},
		{"zero ttl", f.secret, testTenant, 0},
		{"negative ttl", f.secret, testTenant, -time.Minute},
		{"sub-second ttl", f.secret, testTenant, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tok, err := Issue(tt.secret, tt.tenant, "s", ScopeRead, tt.ttl, testNow); err == nil {
				t.Fatalf("Issue = %q, want an error", tok)
			}
		})
	}
}

func decodeSegment(t *testing.T, tok string, i int) map[string]any {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[i])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func decodeHeader(t *testing.T, tok string) map[string]any  { return decodeSegment(t, tok, 0) }
func decodePayload(t *testing.T, tok string) map[string]any { return decodeSegment(t, tok, 1) }

func TestNewVerifier(t *testing.T) {
	t.Parallel()
	f := setup(t)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := func(keys ...testJWK) []byte {
		b, err := jwksOf(keys...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		opts VerifierOptions
		ok   bool
	}{
		{"nothing", VerifierOptions{}, false},
		{"empty secret and jwks", VerifierOptions{HMACSecret: []byte{}, JWKS: []byte{}}, false},
		{"short secret", VerifierOptions{HMACSecret: []byte("0123456789abcdef0123456789abcde")}, false},
		{"32-byte secret", VerifierOptions{HMACSecret: []byte("0123456789abcdef0123456789abcdef")}, true},
		{"negative leeway", VerifierOptions{HMACSecret: f.secret, Leeway: -time.Second}, false},
		{"jwks not json", VerifierOptions{JWKS: []byte("{keys")}, false},
		{"jwks pem", VerifierOptions{JWKS: rsaPublicPEM(t, &f.rsa.PublicKey)}, false},
		{"jwks no keys", VerifierOptions{JWKS: []byte(`{"keys":[]}`)}, false},
		{"jwks bad key", VerifierOptions{JWKS: []byte(`{"keys":[{"kty":"RSA","n":"AQAB"}]}`)}, false},
		{"jwks no kty", VerifierOptions{JWKS: []byte(`{"keys":[{"n":"AQAB","e":"AQAB"}]}`)}, false},
		{"jwks unknown kty", VerifierOptions{JWKS: set(testJWK{Key: f.ed.Public()}, testJWK{Key: "XYZ"})}, false},
		{"jwks ec off curve", VerifierOptions{JWKS: []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"` + strings.Repeat("A", 43) + `","y":"` + strings.Repeat("A", 42) + `E"}]}`)}, false},
		{"jwks ed25519 short", VerifierOptions{JWKS: []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AQAB"}]}`)}, false},
		{"jwks ed25519 bad base64", VerifierOptions{JWKS: []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"!!"}]}`)}, false},
		{"jwks only oct", VerifierOptions{JWKS: set(testJWK{Key: []byte(strings.Repeat("k", 32)), KeyID: "h"})}, false},
		{"jwks only rsa 1024", VerifierOptions{JWKS: set(testJWK{Key: &small.PublicKey})}, false},
		{"jwks only p-384", VerifierOptions{JWKS: set(testJWK{Key: &p384.PublicKey})}, false},
		{"jwks only enc use", VerifierOptions{JWKS: set(testJWK{Key: &f.rsa.PublicKey, Use: "enc"})}, false},
		{"jwks only other alg", VerifierOptions{JWKS: set(testJWK{Key: &f.rsa.PublicKey, Algorithm: "PS256"})}, false},
		{"jwks unusable and usable", VerifierOptions{JWKS: set(testJWK{Key: &small.PublicKey}, testJWK{Key: f.ed.Public()})}, true},
		{"jwks with secret", VerifierOptions{HMACSecret: f.secret, JWKS: f.jwks}, true},
		{"bad jwks with good secret", VerifierOptions{HMACSecret: f.secret, JWKS: []byte("nope")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := NewVerifier(tt.opts)
			if tt.ok && err != nil {
				t.Fatalf("NewVerifier: %v", err)
			}
			if !tt.ok && (err == nil || v != nil) {
				t.Fatalf("NewVerifier = %v, %v; want an error", v, err)
			}
		})
	}
}

func TestNewVerifierJWKSRules(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// A private key in the set verifies with its public half; an RSA key
	// that is also present for encryption only is not used.
	b, err := jwksOf(
		testJWK{Key: f.ec, KeyID: "priv"},
		testJWK{Key: &f.rsa.PublicKey, KeyID: "enc", Use: "enc"},
		testJWK{Key: &f.rsaOther.PublicKey, KeyID: "es", Algorithm: "ES256"},
	)
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(t, VerifierOptions{JWKS: b})
	if _, err := v.Verify(sign(t, jwt.SigningMethodES256, f.ec, "priv", claims())); err != nil {
		t.Fatalf("Verify with private key set: %v", err)
	}
	for name, tok := range map[string]string{
		"enc key":              sign(t, jwt.SigningMethodRS256, f.rsa, "enc", claims()),
		"enc key no kid":       sign(t, jwt.SigningMethodRS256, f.rsa, nil, claims()),
		"rsa key with ec alg":  sign(t, jwt.SigningMethodRS256, f.rsaOther, "es", claims()),
		"rsa key with ec alg2": sign(t, jwt.SigningMethodRS256, f.rsaOther, nil, claims()),
	} {
		if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: Verify = %v, want ErrInvalidToken", name, err)
		}
	}
}

func TestVerifierCopiesSecret(t *testing.T) {
	t.Parallel()
	f := setup(t)
	secret := slices.Clone(f.secret)
	v := newVerifier(t, VerifierOptions{HMACSecret: secret})
	tok, err := Issue(f.secret, testTenant, "", ScopeRead, time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	clear(secret)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("Verify after the caller changed its secret: %v", err)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadSecretFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		want    string // "" means an error
	}{
		{"plain", "s3cret", "s3cret"},
		{"lf", "s3cret\n", "s3cret"},
		{"crlf", "s3cret\r\n", "s3cret"},
		{"several line ends", "s3cret\n\r\n\n", "s3cret"},
		{"inner newline kept", "s3\ncret\n", "s3\ncret"},
		{"spaces kept", " s3cret \n", " s3cret "},
		{"empty", "", ""},
		{"only newline", "\n", ""},
		{"only crlf", "\r\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ReadSecretFile(writeFile(t, "secret", tt.content))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ReadSecretFile = %q, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadSecretFile: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("ReadSecretFile = %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		if _, err := ReadSecretFile(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("ReadSecretFile = %v, want os.ErrNotExist", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		t.Parallel()
		if _, err := ReadSecretFile(writeFile(t, "big", strings.Repeat("a", maxKeyFileBytes+1))); err == nil {
			t.Fatal("ReadSecretFile accepted an oversized file")
		}
	})
}

func TestLoadVerifier(t *testing.T) {
	t.Parallel()
	f := setup(t)
	secretFile := writeFile(t, "secret", string(f.secret)+"\r\n")
	jwksFile := writeFile(t, "jwks.json", string(f.jwks))
	hs, err := Issue(f.secret, testTenant, "", ScopeRead, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rs := sign(t, jwt.SigningMethodRS256, f.rsa, "rsa-1", claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(time.Hour).Unix() }))

	tests := []struct {
		name           string
		secret, jwks   string
		ok, hsOK, rsOK bool
	}{
		{"both", secretFile, jwksFile, true, true, true},
		{"secret only", secretFile, "", true, true, false},
		{"jwks only", "", jwksFile, true, false, true},
		{"neither", "", "", false, false, false},
		{"missing secret file", filepath.Join(t.TempDir(), "nope"), jwksFile, false, false, false},
		{"missing jwks file", secretFile, filepath.Join(t.TempDir(), "nope"), false, false, false},
		{"empty secret file", writeFile(t, "s", "\n"), "", false, false, false},
		{"empty jwks file", "", writeFile(t, "j", ""), false, false, false},
		{"jwks file not json", "", writeFile(t, "j", "not json"), false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := LoadVerifier(tt.secret, tt.jwks)
			if !tt.ok {
				if err == nil {
					t.Fatal("LoadVerifier succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadVerifier: %v", err)
			}
			if _, err := v.Verify(hs); (err == nil) != tt.hsOK {
				t.Errorf("Verify HS256 = %v, want ok %t", err, tt.hsOK)
			}
			if _, err := v.Verify(rs); (err == nil) != tt.rsOK {
				t.Errorf("Verify RS256 = %v, want ok %t", err, tt.rsOK)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header string
		want   string
		ok     bool
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer abc", "abc", true},
		{"BEARER abc", "abc", true},
		{"Bearer   abc", "abc", true},
		{"  Bearer abc  ", "abc", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer    ", "", false},
		{"Bearerabc", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Token abc", "", false},
		{"Bearer abc def", "", false},
		{"Bearer abc\tdef", "", false},
		{"abc", "", false},
	}
	for _, tt := range tests {
		got, ok := BearerToken(tt.header)
		if got != tt.want || ok != tt.ok {
			t.Errorf("BearerToken(%q) = %q, %t; want %q, %t", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestVerifyConcurrent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := newVerifier(t, VerifierOptions{HMACSecret: f.secret, JWKS: f.jwks})
	toks := []string{
		sign(t, jwt.SigningMethodHS256, f.secret, nil, claims()),
		sign(t, jwt.SigningMethodRS256, f.rsa, nil, claims()),
		sign(t, jwt.SigningMethodES256, f.ec, "ec-1", claims()),
		sign(t, jwt.SigningMethodEdDSA, f.ed, nil, claims()),
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(toks))
	for range 8 {
		for _, tok := range toks {
			wg.Go(func() {
				if _, err := v.Verify(tok); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Verify: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	fx := setup(f)
	v := newVerifier(f, VerifierOptions{HMACSecret: fx.secret, JWKS: fx.jwks})
	hs := sign(f, jwt.SigningMethodHS256, fx.secret, nil, claims())
	for _, seed := range []string{
		hs,
		sign(f, jwt.SigningMethodRS256, fx.rsa, "rsa-1", claims()),
		sign(f, jwt.SigningMethodES256, fx.ec, "ec-1", claims()),
		sign(f, jwt.SigningMethodEdDSA, fx.ed, nil, claims()),
		sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil, claims()),
		sign(f, jwt.SigningMethodHS256, fx.secret, nil, claims(func(c jwt.MapClaims) { delete(c, "tenant_id") })),
		sign(f, jwt.SigningMethodHS256, fx.secret, nil, claims(func(c jwt.MapClaims) { c["tenant_id"] = uuid.Nil.String() })),
		sign(f, jwt.SigningMethodHS256, fx.secret, nil, claims(func(c jwt.MapClaims) { c["exp"] = 1e300 })),
		sign(f, jwt.SigningMethodHS256, fx.secret, nil, claims(func(c jwt.MapClaims) { delete(c, "exp") })),
		sign(f, jwt.SigningMethodRS256, fx.rsa, "nope", claims()),
		sign(f, jwt.SigningMethodHS256, rsaPublicPEM(f, &fx.rsa.PublicKey), nil, claims()),
		hs[:len(hs)-2],
		hs + "x",
		"",
		".",
		"..",
		"a.b.c",
		"eyJhbGciOiJIUzI1NiJ9.e30.",
		"eyJhbGciOiJub25lIn0.eyJ0ZW5hbnRfaWQiOiIwYjZlNGYzYS04YzFkLTRmMmUtOWE3Yi0zYzVkNmU3ZjhhOWIifQ.",
		signRaw(f, jwt.SigningMethodHS256, fx.secret, `{"alg":"HS256"}`, `{"tenant_id":"`+testTenant.String()+`","TENANT_ID":"`+uuid.NewString()+`","exp":1e12}`),
		signRaw(f, jwt.SigningMethodHS256, fx.secret, `{"alg":"HS256","crit":["exp"]}`, `{"tenant_id":"`+testTenant.String()+`","exp":1e12}`),
		signRaw(f, jwt.SigningMethodHS256, fx.secret, `{"alg":"HS256"}`, `{"tenant_id":"`+testTenant.String()+`","exp":"1e12"}`),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := v.Verify(token)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("error %v does not wrap ErrInvalidToken", err)
			}
			if len(token) > 64 && strings.Contains(err.Error(), token) {
				t.Fatalf("error %q echoes the token", err)
			}
			return
		}
		if c.TenantID == uuid.Nil {
			t.Fatalf("accepted token with nil tenant: %+v", c)
		}
		if !c.ExpiresAt.After(testNow) {
			t.Fatalf("accepted token expiring at %s, before %s", c.ExpiresAt, testNow)
		}
		if len(token) > maxTokenBytes {
			t.Fatalf("accepted a token of %d bytes", len(token))
		}
	})
}

// A remembered token is taken again without being verified, but never past
// its exp (plus leeway) nor past TokenCacheTTL; a bad token is never
// remembered.
func TestVerifyCache(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := testNow
	clock := func() time.Time { return now }
	v := newVerifier(t, VerifierOptions{HMACSecret: f.secret, Now: clock, Leeway: 2 * time.Second})
	short, err := Issue(f.secret, testTenant, "calendar", ScopeWrite, 10*time.Second, testNow)
	if err != nil {
		t.Fatal(err)
	}
	long, err := Issue(f.secret, testTenant, "calendar", ScopeWrite, time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	first, err := v.Verify(short)
	if err != nil {
		t.Fatal(err)
	}
	if v.cache.len() != 1 {
		t.Fatalf("cache holds %d tokens after one verified, want 1", v.cache.len())
	}
	first.Scopes[0] = "changed by the caller"
	again, err := v.Verify(short)
	if err != nil || again.TenantID != testTenant || !again.CanWrite() || again.Subject != "calendar" {
		t.Fatalf("remembered token: %+v, %v", again, err)
	}

	// Past exp + leeway, a remembered token is refused like any other.
	now = testNow.Add(12 * time.Second)
	if _, err := v.Verify(short); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("remembered token after exp + leeway: err %v, want ErrInvalidToken", err)
	}
	// A valid token is remembered for TokenCacheTTL at most, then verified
	// again: with the clock past its exp by then, it is refused.
	if _, err := v.Verify(long); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.cache.get(sha256.Sum256([]byte(long)), now.Add(TokenCacheTTL)); ok {
		t.Fatal("token remembered past TokenCacheTTL")
	}

	// Bad tokens are not remembered.
	v = newVerifier(t, VerifierOptions{HMACSecret: f.secret})
	for range 3 {
		if _, err := v.Verify(tamper(t, long, testNow.Add(2*time.Hour))); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("tampered token: err %v, want ErrInvalidToken", err)
		}
	}
	if v.cache.len() != 0 {
		t.Fatalf("cache holds %d tokens after only bad ones, want 0", v.cache.len())
	}

	// The cache is bounded; with CacheSize < 0 there is none.
	v = newVerifier(t, VerifierOptions{HMACSecret: f.secret, CacheSize: 3})
	for i := range 10 {
		tok, err := Issue(f.secret, testTenant, fmt.Sprintf("s%d", i), ScopeRead, time.Hour, testNow)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := v.Verify(tok); err != nil || c.Subject != fmt.Sprintf("s%d", i) {
			t.Fatalf("token %d: %+v, %v", i, c, err)
		}
		if n := v.cache.len(); n > 3 {
			t.Fatalf("cache of 3 holds %d tokens", n)
		}
	}
	if v = newVerifier(t, VerifierOptions{HMACSecret: f.secret, CacheSize: -1}); v.cache != nil {
		t.Fatal("CacheSize -1: a cache")
	}
	if _, err := v.Verify(long); err != nil {
		t.Fatal(err)
	}
}

// signRaw signs the header and payload exactly as given (the jwt library
// would marshal a map, which can hold no duplicate name).
func signRaw(t testing.TB, m jwt.SigningMethod, key any, header, payload string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	sig, err := m.Sign(signing, key)
	if err != nil {
		t.Fatalf("sign %s: %v", m.Alg(), err)
	}
	return signing + "." + enc.EncodeToString(sig)
}

// TestVerifyStrict: claim names match exactly, a name given twice (or twice
// but for case) is refused, exp, nbf and iat must be JSON numbers, and an
// unknown crit header parameter or a duplicate header parameter is refused;
// on every key source. Found by a black-box attack: a validly signed token
// with tenant_id and TENANT_ID acted for the second tenant, Scope overrode
// scope, and "exp": "1e12" was taken for a date.
func TestVerifyStrict(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := newVerifier(t, VerifierOptions{HMACSecret: f.secret, JWKS: f.jwks})
	other := uuid.MustParse("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")
	exp := testNow.Add(time.Hour).Unix()
	tenant := `"tenant_id":"` + testTenant.String() + `"`
	signers := []struct {
		m   jwt.SigningMethod
		key any
		kid string
	}{
		{jwt.SigningMethodHS256, f.secret, ""},
		{jwt.SigningMethodRS256, f.rsa, "rsa-1"},
		{jwt.SigningMethodES256, f.ec, "ec-1"},
		{jwt.SigningMethodEdDSA, f.ed, "ed-1"},
	}
	tests := []struct {
		name    string
		header  string // %s: alg and kid members
		payload string
		reason  string // "": accepted
		scopes  []string
	}{
		{"exact", `{%s}`, fmt.Sprintf(`{%s,"scope":"mcp:read","exp":%d}`, tenant, exp), "", []string{ScopeRead}},
		{"exp as exponent number", `{%s}`, fmt.Sprintf(`{%s,"exp":1e12}`, tenant), "", nil},
		{"upper-case names are other claims", `{%s}`, fmt.Sprintf(`{"TENANT_ID":"%s","Scope":"mcp:write","EXP":%d}`, testTenant, exp), "exp missing", nil},
		{"upper-case tenant is another claim", `{%s}`, fmt.Sprintf(`{"TENANT_ID":"%s","exp":%d}`, testTenant, exp), "tenant_id missing", nil},
		{"Scope is not scope", `{%s}`, fmt.Sprintf(`{%s,"Scope":"mcp:write","exp":%d}`, tenant, exp), "", nil},
		{"tenant_id then TENANT_ID", `{%s}`, fmt.Sprintf(`{%s,"TENANT_ID":"%s","exp":%d}`, tenant, other, exp), "duplicate claim tenant_id", nil},
		{"Tenant_Id then tenant_id", `{%s}`, fmt.Sprintf(`{"Tenant_Id":"%s",%s,"exp":%d}`, other, tenant, exp), "duplicate claim tenant_id", nil},
		{"tenant_id twice", `{%s}`, fmt.Sprintf(`{%s,"tenant_id":"%s","exp":%d}`, tenant, other, exp), "duplicate claim tenant_id", nil},
		{"escaped duplicate", `{%s}`, fmt.Sprintf(`{%s,"tenant\u005fid":"%s","exp":%d}`, tenant, other, exp), "duplicate claim tenant_id", nil},
		{"scope then Scope", `{%s}`, fmt.Sprintf(`{%s,"scope":"mcp:read","Scope":"mcp:write","exp":%d}`, tenant, exp), "duplicate claim scope", nil},
		{"scope then long s cope", `{%s}`, fmt.Sprintf(`{%s,"scope":"mcp:read","ſcope":"mcp:write","exp":%d}`, tenant, exp), "duplicate claim scope", nil},
		{"exp twice", `{%s}`, fmt.Sprintf(`{%s,"exp":%d,"exp":%d}`, tenant, exp-7200, exp), "duplicate claim exp", nil},
		{"unknown claim twice", `{%s}`, fmt.Sprintf(`{%s,"x":1,"x":2,"exp":%d}`, tenant, exp), "duplicate claim name", nil},
		{"exp string number", `{%s}`, fmt.Sprintf(`{%s,"exp":"1e12"}`, tenant), "exp is not a number", nil},
		{"exp string digits", `{%s}`, fmt.Sprintf(`{%s,"exp":"%d"}`, tenant, exp), "exp is not a number", nil},
		{"exp bool", `{%s}`, fmt.Sprintf(`{%s,"exp":true}`, tenant), "exp is not a number", nil},
		{"nbf string", `{%s}`, fmt.Sprintf(`{%s,"exp":%d,"nbf":"0"}`, tenant, exp), "nbf is not a number", nil},
		{"iat string", `{%s}`, fmt.Sprintf(`{%s,"exp":%d,"iat":"0"}`, tenant, exp), "iat is not a number", nil},
		{"iat object", `{%s}`, fmt.Sprintf(`{%s,"exp":%d,"iat":{}}`, tenant, exp), "iat is not a number", nil},
		{"payload array", `{%s}`, `[]`, "malformed", nil},
		{"payload null", `{%s}`, `null`, "malformed", nil},
		{"payload trailing data", `{%s}`, fmt.Sprintf(`{%s,"exp":%d} {}`, tenant, exp), "malformed", nil},
		{"payload not utf-8", `{%s}`, fmt.Sprintf("{%s,\"x\":\"\xff\",\"exp\":%d}", tenant, exp), "malformed", nil},
		{"header not utf-8", "{%s,\"x\":\"\xc3\"}", fmt.Sprintf(`{%s,"exp":%d}`, tenant, exp), "malformed", nil},
		{"crit", `{%s,"crit":["exp"]}`, fmt.Sprintf(`{%s,"exp":%d}`, tenant, exp), "crit header parameter not understood", nil},
		{"crit empty", `{%s,"crit":[]}`, fmt.Sprintf(`{%s,"exp":%d}`, tenant, exp), "crit header parameter not understood", nil},
		{"crit b64", `{%s,"b64":false,"crit":["b64"]}`, fmt.Sprintf(`{%s,"exp":%d}`, tenant, exp), "crit header parameter not understood", nil},
		{"typ twice", `{%s,"typ":"JWT","typ":"JWT"}`, fmt.Sprintf(`{%s,"exp":%d}`, tenant, exp), "duplicate header parameter", nil},
		{"alg twice", `{"alg":"none",%s}`, fmt.Sprintf(`{%s,"exp":%d}`, tenant, exp), "duplicate header parameter", nil},
		{"ALG beside alg", `{%s,"ALG":"none"}`, fmt.Sprintf(`{%s,"exp":%d}`, tenant, exp), "duplicate header parameter", nil},
		{"header trailing data", `{%s}{}`, fmt.Sprintf(`{%s,"exp":%d}`, tenant, exp), "malformed", nil},
	}
	for _, s := range signers {
		for _, tt := range tests {
			t.Run(s.m.Alg()+" "+tt.name, func(t *testing.T) {
				t.Parallel()
				params := `"alg":"` + s.m.Alg() + `"`
				if s.kid != "" {
					params += `,"kid":"` + s.kid + `"`
				}
				tok := signRaw(t, s.m, s.key, fmt.Sprintf(tt.header, params), tt.payload)
				for range 2 { // the second time through the cache, if it held it
					c, err := v.Verify(tok)
					if tt.reason == "" {
						if err != nil {
							t.Fatalf("Verify: %v", err)
						}
						if c.TenantID != testTenant || !slices.Equal(c.Scopes, tt.scopes) {
							t.Fatalf("claims %+v, want tenant %s scopes %q", c, testTenant, tt.scopes)
						}
						continue
					}
					if err == nil {
						t.Fatalf("Verify accepted the token (tenant %s, scopes %q), want %q", c.TenantID, c.Scopes, tt.reason)
					}
					if want := "invalid token: " + tt.reason; err.Error() != want {
						t.Fatalf("error = %q, want %q", err, want)
					}
				}
			})
		}
	}
	// A refused token is never remembered.
	cached := newVerifier(t, VerifierOptions{HMACSecret: f.secret})
	dup := signRaw(t, jwt.SigningMethodHS256, f.secret, `{"alg":"HS256"}`, fmt.Sprintf(`{%s,"TENANT_ID":"%s","exp":%d}`, tenant, other, exp))
	crit := signRaw(t, jwt.SigningMethodHS256, f.secret, `{"alg":"HS256","crit":["x"],"x":1}`, fmt.Sprintf(`{%s,"exp":%d}`, tenant, exp))
	for range 3 {
		for _, tok := range []string{dup, crit} {
			if _, err := cached.Verify(tok); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("refused token: %v", err)
			}
		}
	}
	if n := cached.cache.len(); n != 0 {
		t.Fatalf("cache holds %d refused tokens", n)
	}
}

// FuzzObjectMembers: objectMembers, which walks valid JSON by hand, agrees
// with encoding/json's tokens: the same members by exact name, a
// duplicate exactly when two names are equal under case folding, and no
// object exactly when the decoder finds none or the text is not UTF-8.
func FuzzObjectMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { "a" : 1 , "b" : [1,{"c":"}"}] } `, `{"a":"x\"}","A":2}`, `{"tenant_id":1,"TENANT_ID":2}`,
		`{"scope":1,"ſcope":2}`, `{"k":1,"K":2}`, `{"a\u0062":1,"ab":2}`, `{"a":1}{}`, `[]`, `null`, `{"a":-1.5e3,"b":true,"c":null}`,
		`{"a":{"a":1,"a":2}}`, "{\"\xff\":1,\"\xfe\":2}", `{"a":1,}`, `{"a"}`, ``, `{"":0,"":[]}`,
	} {
		f.Add([]byte(s))
	}
	// Many names: past the linear search.
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf(`"n%d":%d`, i, i))
	}
	f.Add([]byte("{" + strings.Join(many, ",") + "}"))
	f.Add([]byte("{" + strings.Join(many, ",") + `,"N39":1}`))
	f.Add([]byte("{" + strings.Join(many, ",") + `,"ſ":1,"S":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, dup, err := objectMembers(data)
		want, ok := decoderMembers(data)
		if !ok {
			if err == nil && dup == "" {
				t.Fatalf("%q: members %v, the decoder finds no object", data, got)
			}
			return
		}
		var names []string
		for _, m := range want {
			names = append(names, m.name)
		}
		folds := false
		for i := range names {
			for j := range i {
				folds = folds || strings.EqualFold(names[i], names[j])
			}
		}
		if folds != (dup != "") || err != nil {
			t.Fatalf("%q: dup %q err %v, want a duplicate %t", data, dup, err, folds)
		}
		if folds {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d", data, len(got), len(want))
		}
		for _, m := range want {
			if string(got[m.name]) != string(m.raw) {
				t.Fatalf("%q: member %q = %s, want %s", data, m.name, got[m.name], m.raw)
			}
		}
	})
}

type member struct {
	name string
	raw  json.RawMessage
}

// decoderMembers lists the members of data with encoding/json's decoder,
// in order; ok is false when data is not one JSON object.
func decoderMembers(data []byte) (members []member, ok bool) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		members = append(members, member{tok.(string), raw})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err == nil || !json.Valid(data) || !utf8.Valid(data) {
		return nil, false
	}
	return members, true
}

// testJWK is a key of a test JWKS: Key is an RSA, ECDSA or Ed25519 key
// (public or private), a []byte (a symmetric "oct" key) or a string (the
// kty of a key of some other type, with no members).
type testJWK struct {
	Key                   any
	KeyID, Algorithm, Use string
}

// jwksOf marshals keys as a JSON Web Key Set, as an identity provider
// publishes one.
func jwksOf(keys ...testJWK) ([]byte, error) {
	b64 := base64.RawURLEncoding.EncodeToString
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	for _, k := range keys {
		m := map[string]string{}
		switch key := k.Key.(type) {
		case *rsa.PrivateKey:
			m["kty"], m["n"], m["e"] = "RSA", b64(key.N.Bytes()), b64(big.NewInt(int64(key.E)).Bytes())
			m["d"] = b64(key.D.Bytes())
		case *rsa.PublicKey:
			m["kty"], m["n"], m["e"] = "RSA", b64(key.N.Bytes()), b64(big.NewInt(int64(key.E)).Bytes())
		case *ecdsa.PrivateKey:
			d, err := key.Bytes()
			if err != nil {
				return nil, err
			}
			if err := ecPublic(m, &key.PublicKey); err != nil {
				return nil, err
			}
			m["d"] = b64(d)
		case *ecdsa.PublicKey:
			if err := ecPublic(m, key); err != nil {
				return nil, err
			}
		case ed25519.PublicKey:
			m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64(key)
		case []byte:
			m["kty"], m["k"] = "oct", b64(key)
		case string:
			m["kty"] = key
		default:
			return nil, fmt.Errorf("jwksOf: key of type %T", k.Key)
		}
		for name, v := range map[string]string{"kid": k.KeyID, "alg": k.Algorithm, "use": k.Use} {
			if v != "" {
				m[name] = v
			}
		}
		set.Keys = append(set.Keys, m)
	}
	return json.Marshal(set)
}

// ecPublic sets the JWK members kty, crv, x and y of key in m.
func ecPublic(m map[string]string, key *ecdsa.PublicKey) error {
	point, err := key.Bytes() // 0x04 || X || Y, each padded to the curve's size
	if err != nil {
		return err
	}
	xy := point[1:]
	b64 := base64.RawURLEncoding.EncodeToString
	m["kty"], m["crv"] = "EC", key.Curve.Params().Name
	m["x"], m["y"] = b64(xy[:len(xy)/2]), b64(xy[len(xy)/2:])
	return nil
}
