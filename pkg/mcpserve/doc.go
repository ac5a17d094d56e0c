// Package mcpserve is mcpd as an MCP server: the /mcp endpoint
// (Streamable HTTP) with the tools find_skill, list_servers and
// get_server, the resources mcpd://skills/{name} and
// mcpd://servers/{module_name}, and their change notifications.
//
// Each tenant that has callers gets its own MCP server, so that
// subscriptions, notifications and sessions never cross tenants; its
// notifications follow the change feed (pkg/feed) once for all of the
// tenant's subscribers, coalesced per resource. Revision 2026-07-28
// requests are served statelessly and older revisions (2025-11-25) by a
// session, chosen per request by the MCP-Protocol-Version header.
package mcpserve
