package api

import "github.com/cyberos/mcpd/pkg/apiwire"

// The API's wire types live in pkg/apiwire, which the client imports
// without the server's dependencies; these aliases keep their names here.
type (
	// RegisterRequest is the body of POST /v1/mcp/servers/register.
	RegisterRequest = apiwire.RegisterRequest
	// ServerIDRequest is the body of the heartbeat and deregister calls.
	ServerIDRequest = apiwire.ServerIDRequest
	// ServerList is the answer of GET /v1/mcp/servers.
	ServerList = apiwire.ServerList
	// SkillList is the answer of GET /v1/mcp/servers/{server_id}/skills.
	SkillList = apiwire.SkillList
	// EventList is the answer of GET /v1/mcp/audit.
	EventList = apiwire.EventList
	// SkillDirectory is the answer of GET /v1/mcp/skills.
	SkillDirectory = apiwire.SkillDirectory
	// Problem is an RFC 9457 problem details object, the body of every error.
	Problem = apiwire.Problem
)

// Header and content types of the API.
const (
	ContentTypeJSON    = apiwire.ContentTypeJSON
	ContentTypeProblem = apiwire.ContentTypeProblem
	HeaderTraceparent  = apiwire.HeaderTraceparent

	ContentTypeEventStream = apiwire.ContentTypeEventStream
	EventBookmark          = apiwire.EventBookmark
	HeaderLastEventID      = apiwire.HeaderLastEventID
)

// MaxBodyBytes caps every request body (256 KiB).
const MaxBodyBytes = apiwire.MaxBodyBytes
