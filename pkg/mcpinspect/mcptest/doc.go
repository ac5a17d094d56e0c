// Package mcptest runs small, real MCP servers (built with the MCP Go SDK)
// for tests: in the test process over streamable HTTP (ServeHTTP), and
// over stdio as a child process, the test binary started again in a server
// mode (NewStdio; the test's TestMain calls ServeIfAsked first). Their tool
// list can change at run time (each change sends
// notifications/tools/list_changed), and their liveness answer (ping and
// server/discover) can be made to fail or hang. ServerEverything installs
// the reference server @modelcontextprotocol/server-everything from npm.
package mcptest
