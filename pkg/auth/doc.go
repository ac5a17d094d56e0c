// Package auth verifies and issues the bearer tokens of the mcpd API.
//
// A token is a JWT carrying tenant_id (a UUID, required), sub (optional), exp
// (required) and scope (space-separated, optional). HS256 tokens are checked
// with a shared secret of at least 32 bytes; RS256, ES256 and EdDSA (Ed25519)
// tokens with the public keys of a JWKS file. Every other algorithm, and any
// algorithm whose key source is not configured, is refused. The tenant of a
// request comes from a verified token alone.
//
// Tokens are read strictly: claim names match exactly (TENANT_ID is not
// tenant_id), a name that appears twice in the header or the claims (also
// twice but for case) refuses the token, exp, nbf and iat must be JSON
// numbers, and a crit header parameter refuses it (mcpd understands no JWS
// extension, RFC 7515 section 4.1.11).
package auth
