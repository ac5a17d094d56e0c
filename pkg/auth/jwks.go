package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// maxRSABits is the largest RSA modulus a JWKS may hold, as go-jose held
// it: a larger one makes every verification slow.
const maxRSABits = 4096

// jwk is the part of a JSON Web Key (RFC 7517, RFC 7518 section 6, RFC 8037)
// that names and holds a public signing key; private members are ignored.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS returns the signing keys of a JWKS that Verify can use: RSA of
// 2048 to 4096 bits (RS256), ECDSA P-256 (ES256) and Ed25519 (EdDSA). Keys
// marked for another use or algorithm, of another curve or size, or
// symmetric ("oct") are left out; of a private key only the public half is
// read. A key that is malformed, or of a type that JOSE does not define,
// refuses the whole set, so that a typo is not silently a missing key.
//
// golang-jwt, which verifies the tokens, reads no JWK; go-jose does, but
// linking a second JOSE library for these few members was the only thing
// it did here.
func parseJWKS(data []byte) ([]publicKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("parse jwks: %w", err)
	}
	var keys []publicKey
	for i, k := range set.Keys {
		key, alg, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("parse jwks: key %d: %w", i, err)
		}
		if key == nil || k.Use != "" && k.Use != "sig" || k.Alg != "" && k.Alg != alg {
			continue
		}
		keys = append(keys, publicKey{kid: k.Kid, alg: alg, key: key})
	}
	if len(keys) == 0 {
		return nil, errors.New("parse jwks: no usable signing key (RS256 >= 2048 bits, ES256 P-256, EdDSA Ed25519)")
	}
	return keys, nil
}

// publicKey returns k's public key and the algorithm it verifies, or a nil
// key when k is well formed but not one Verify uses.
func (k jwk) publicKey() (any, string, error) {
	switch k.Kty {
	case "RSA":
		n, err := jwkInt("n", k.N)
		if err != nil {
			return nil, "", err
		}
		e, err := jwkInt("e", k.E)
		if err != nil {
			return nil, "", err
		}
		if !e.IsInt64() || e.Int64() < 2 || e.Int64() > math.MaxInt {
			return nil, "", errors.New("invalid RSA key: bad e")
		}
		if bits := n.BitLen(); bits < minRSABits || bits > maxRSABits {
			return nil, "", nil
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, algRS256, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, "", fmt.Errorf("unsupported EC curve %q", k.Crv)
		}
		size := (curve.Params().BitSize + 7) / 8
		x, errX := jwkBytes("x", k.X)
		y, errY := jwkBytes("y", k.Y)
		if err := errors.Join(errX, errY); err != nil {
			return nil, "", err
		}
		if len(x) != size || len(y) != size {
			return nil, "", errors.New("invalid EC key: wrong length for x or y")
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, "", fmt.Errorf("invalid EC key: %w", err)
		}
		if curve != elliptic.P256() {
			return nil, "", nil
		}
		return pub, algES256, nil
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, "", fmt.Errorf("unsupported OKP curve %q", k.Crv)
		}
		x, err := jwkBytes("x", k.X)
		if err != nil {
			return nil, "", err
		}
		if len(x) != ed25519.PublicKeySize {
			return nil, "", errors.New("invalid Ed25519 key: wrong length for x")
		}
		return ed25519.PublicKey(x), algEdDSA, nil
	case "oct":
		return nil, "", nil
	case "":
		return nil, "", errors.New("missing kty")
	default:
		return nil, "", fmt.Errorf("unsupported kty %q", k.Kty)
	}
}

// jwkBytes decodes a required base64url member of a JWK; trailing padding
// is tolerated, as go-jose tolerated it.
func jwkBytes(name, s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("missing %s", name)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("bad base64url in %s: %w", name, err)
	}
	return b, nil
}

// jwkInt decodes a required base64url big-endian unsigned integer member.
func jwkInt(name, s string) (*big.Int, error) {
	b, err := jwkBytes(name, s)
	if err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}
