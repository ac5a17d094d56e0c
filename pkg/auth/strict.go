package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cyberos/mcpd/pkg/internal/jsonscan"
)

// A token is read twice: once here, strictly, and once by the jwt library,
// which checks the algorithm, the signature and the times. encoding/json
// matches names case-insensitively and keeps the last of duplicate names, so
// the library alone would take "TENANT_ID" for tenant_id, the second of two
// tenant_id claims, and a number in a string for exp. Here every header
// parameter and claim name must be unique, claims are matched by their exact
// names, and each claim mcpd reads must have its JSON type. The walk over
// the text is jsonscan's, which the API's body reader shares (its package
// comment says why no library does it).

// formatError is a token whose header or claims break the strict rules; its
// text is the reason Verify gives.
type formatError struct{ reason string }

func (e *formatError) Error() string { return e.reason }

func formatErrorf(format string, args ...any) error {
	return &formatError{reason: fmt.Sprintf(format, args...)}
}

// errNotObject: a header or payload that is not one JSON object.
var errNotObject = errors.New("not a JSON object")

// knownClaims are the claim names an error message may repeat.
var knownClaims = []string{"tenant_id", "scope", "sub", "exp", "nbf", "iat", "iss", "aud", "jti"}

// objectMembers returns the members of the JSON object data by exact name.
// Anything but one JSON object (and white space) in UTF-8 (RFC 8259 section
// 8.1) is errNotObject. A name that appears twice, or two names that differ
// only in case (which encoding/json, and so many a JWT library, would take
// for one), are returned as dup: one of the two, the one in knownClaims if
// either is; the empty name twice is dup `""`, quoted, as dup "" says there
// is none.
func objectMembers(data []byte) (members map[string]json.RawMessage, dup string, err error) {
	if !utf8.Valid(data) || !json.Valid(data) {
		return nil, "", errNotObject
	}
	// Valid JSON from here on: the walk need not check the syntax.
	sc := jsonscan.Scanner{Data: data}
	if sc.Peek() != '{' {
		return nil, "", errNotObject
	}
	sc.Enter()
	members = make(map[string]json.RawMessage, 8)
	var (
		names  []string          // in order, while there are few
		folded map[string]string // foldKey -> name, once there are many
	)
	for {
		lit, ok := sc.Member()
		if !ok {
			return members, "", nil
		}
		name, _ := jsonscan.String(lit)
		value := sc.Value()
		if prev, seen := foldSeen(&names, &folded, name); seen {
			if slices.Contains(knownClaims, prev) {
				return nil, prev, nil
			}
			if name == "" {
				return nil, `""`, nil
			}
			return nil, name, nil
		}
		members[name] = value
	}
}

// foldSeen reports the name seen before that equals name under case
// folding, and records name. A few names are compared one by one (a token
// has a handful of claims); past manyNames they go into a map by foldKey,
// so that a token of many claims costs no more than linear time.
func foldSeen(names *[]string, folded *map[string]string, name string) (string, bool) {
	const manyNames = 32
	if *folded == nil {
		for _, prev := range *names {
			if strings.EqualFold(prev, name) {
				return prev, true
			}
		}
		*names = append(*names, name)
		if len(*names) < manyNames {
			return "", false
		}
		*folded = make(map[string]string, 2*manyNames)
		for _, n := range *names {
			(*folded)[foldKey(n)] = n
		}
		return "", false
	}
	key := foldKey(name)
	if prev, ok := (*folded)[key]; ok {
		return prev, true
	}
	(*folded)[key] = name
	return "", false
}

// foldKey maps s to a key that is the same for every string equal to s
// under Unicode simple case folding (strings.EqualFold): each rune becomes
// the smallest rune of its folding orbit ("S", "s" and "ſ" all "S").
func foldKey(s string) string {
	ascii := true
	for i := 0; i < len(s) && ascii; i++ {
		ascii = s[i] < utf8.RuneSelf
	}
	if ascii {
		// The smallest rune of an ASCII letter's orbit is its upper case
		// ("ſ" and the Kelvin sign are larger than "S" and "K").
		return strings.ToUpper(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// segment decodes one base64url segment of a compact JWS, as the parser does.
func segment(s string) ([]byte, error) {
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

// checkToken reads the header and the claims of token strictly: each a JSON
// object with unique member names, no crit header parameter (mcpd
// understands no extension, RFC 7515 section 4.1.11), and the claims mcpd
// reads of their JSON types. It does not verify anything.
func checkToken(token string) (tokenClaims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return tokenClaims{}, formatErrorf("malformed")
	}
	header, err := segment(parts[0])
	if err != nil {
		return tokenClaims{}, formatErrorf("malformed")
	}
	params, dup, err := objectMembers(header)
	switch {
	case err != nil:
		return tokenClaims{}, formatErrorf("malformed")
	case dup != "":
		return tokenClaims{}, formatErrorf("duplicate header parameter")
	}
	if _, ok := params["crit"]; ok {
		return tokenClaims{}, formatErrorf("crit header parameter not understood")
	}
	payload, err := segment(parts[1])
	if err != nil {
		return tokenClaims{}, formatErrorf("malformed")
	}
	return parseClaims(payload)
}

// parseClaims reads the claims of a token's payload by their exact names.
// A null claim counts as absent.
func parseClaims(payload []byte) (tokenClaims, error) {
	members, dup, err := objectMembers(payload)
	switch {
	case err != nil:
		return tokenClaims{}, formatErrorf("malformed")
	case dup != "" && slices.Contains(knownClaims, dup):
		return tokenClaims{}, formatErrorf("duplicate claim %s", dup)
	case dup != "":
		return tokenClaims{}, formatErrorf("duplicate claim name")
	}
	var c tokenClaims
	for name, raw := range members {
		if string(raw) == "null" {
			continue
		}
		var err error
		switch name {
		case "tenant_id":
			c.TenantID, err = stringClaim(name, raw)
		case "scope":
			c.Scope, err = stringClaim(name, raw)
		case "sub":
			err = setString(&c.Subject, name, raw)
		case "iss":
			err = setString(&c.Issuer, name, raw)
		case "jti":
			_, err = stringClaim(name, raw)
		case "exp":
			c.ExpiresAt, err = dateClaim(name, raw)
		case "nbf":
			c.NotBefore, err = dateClaim(name, raw)
		case "iat":
			c.IssuedAt, err = dateClaim(name, raw)
		case "aud":
			if err = c.Audience.UnmarshalJSON(raw); err != nil {
				err = formatErrorf("aud is not a string or an array of strings")
			}
		}
		if err != nil {
			return tokenClaims{}, err
		}
	}
	return c, nil
}

// stringClaim reads a claim that must be a JSON string.
func stringClaim(name string, raw json.RawMessage) (*string, error) {
	if raw[0] != '"' {
		return nil, formatErrorf("%s is not a string", name)
	}
	s, _ := jsonscan.String(raw)
	return &s, nil
}

// setString reads a claim that must be a JSON string into dst.
func setString(dst *string, name string, raw json.RawMessage) error {
	s, err := stringClaim(name, raw)
	if err == nil {
		*dst = *s
	}
	return err
}

// dateClaim reads a NumericDate claim, which must be a JSON number (a
// number in a string is not one).
func dateClaim(name string, raw json.RawMessage) (*jwt.NumericDate, error) {
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return nil, formatErrorf("%s is not a number", name)
	}
	var d jwt.NumericDate
	if err := d.UnmarshalJSON(raw); err != nil {
		return nil, formatErrorf("%s is not a number", name)
	}
	return &d, nil
}

// tokenClaims are the claims of a token as parseClaims read them.
type tokenClaims struct {
	TenantID  *string
	Scope     *string
	Subject   string
	Issuer    string
	Audience  jwt.ClaimStrings
	ExpiresAt *jwt.NumericDate
	NotBefore *jwt.NumericDate
	IssuedAt  *jwt.NumericDate
}

// parsedClaims hands claims that parseClaims read to the jwt library for
// its checks of the times. The library decodes the same payload again into
// it; that decoding is ignored, so that the strict reading is the only one.
type parsedClaims struct{ c *tokenClaims }

// UnmarshalJSON ignores data: the claims were read by parseClaims.
func (*parsedClaims) UnmarshalJSON([]byte) error { return nil }

func (p parsedClaims) GetExpirationTime() (*jwt.NumericDate, error) { return p.c.ExpiresAt, nil }
func (p parsedClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return p.c.IssuedAt, nil }
func (p parsedClaims) GetNotBefore() (*jwt.NumericDate, error)      { return p.c.NotBefore, nil }
func (p parsedClaims) GetIssuer() (string, error)                   { return p.c.Issuer, nil }
func (p parsedClaims) GetSubject() (string, error)                  { return p.c.Subject, nil }
func (p parsedClaims) GetAudience() (jwt.ClaimStrings, error)       { return p.c.Audience, nil }
