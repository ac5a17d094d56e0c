// Package apiwire holds what travels over mcpd's HTTP API: the request and
// list bodies, the RFC 9457 problem with its stable type URIs, and the
// header and content type names. It depends on the domain types of
// pkg/registry and the standard library only, so that the client
// (pkg/client) builds without the server's dependencies; pkg/api keeps
// aliases of every name.
package apiwire
