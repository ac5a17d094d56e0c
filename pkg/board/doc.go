// Package board serves mcpd's read-only web board at /ui/: plain HTML, CSS
// and JavaScript modules embedded in the binary, sent with a Content
// Security Policy that allows nothing from another origin and no inline
// script or style. The page signs in with a bearer token kept in the tab's
// sessionStorage, lists the tenant's servers once and then follows the
// change feed (GET /v1/mcp/watch) with fetch and a streamed body.
package board
