// Package api is mcpd's HTTP API: the handler serving every /v1 call of the
// contract over a lifecycle.Registrar, the operational endpoints (/healthz,
// /readyz, /metrics), and the wire types that the client shares.
package api
