// Package mcpinspect connects to an MCP server as a client and learns what
// it says of itself: its serverInfo (name and version), the protocol
// revision negotiated with it and the other revisions it accepts, its
// capabilities object as it sent it, and its tools. A Report of that turns
// into an mcpd registration (RegisterRequest), the tools becoming skills.
//
// Two transports: streamable HTTP (Target.URL) and stdio (Target.Command,
// which this package starts and stops). It uses the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk). A Session stays open for the
// sidecar agent: Ping is its liveness probe (ping, or server/discover for
// revisions from 2026-07-28 on, where ping was removed), Done tells when
// the connection or the process ended, and Options.OnToolsChanged is
// called on notifications/tools/list_changed.
//
// Revisions: with revision 2026-07-28 a server answers server/discover with
// the list of revisions it supports, which is taken as it is (within the
// SDK's known list). A server without server/discover is asked with one
// initialize per other revision of the SDK's list (Options.ProbeRevisions),
// and accepts a revision when it answers with that same revision.
package mcpinspect
