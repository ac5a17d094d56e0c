// Package tlstest makes certificate authorities, server and client
// certificates at test time (ECDSA P-256, PEM), so that no key is ever
// committed: tests of mcpd's TLS, mTLS and PostgreSQL over TLS use it.
package tlstest
