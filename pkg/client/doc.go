// Package client is the typed Go client of mcpd's HTTP API, used by mcpctl,
// the heartbeat simulator and the end-to-end tests. Every answer that is not
// a 2xx comes back as an *apiwire.Problem (pkg/api.Problem is the same type).
package client
