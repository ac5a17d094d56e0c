package apiwire

import (
	"encoding/json"

	"github.com/cyberos/mcpd/pkg/registry"
)

// RegisterRequest is the body of POST /v1/mcp/servers/register.
type RegisterRequest struct {
	ModuleName              string               `json:"module_name"`
	Version                 string               `json:"version"`
	SupportedProtocols      []string             `json:"supported_protocols"`
	CapabilityAdvertisement json.RawMessage      `json:"capability_advertisement,omitempty"`
	Skills                  []registry.SkillInfo `json:"skills,omitempty"`
	// Remotes, Description and Title are where the server is reached and
	// how it describes itself (server.json terms); a re-registration
	// replaces them.
	Remotes     []registry.Remote `json:"remotes,omitempty"`
	Description *string           `json:"description,omitempty"`
	Title       *string           `json:"title,omitempty"`
}

// ServerIDRequest is the body of the heartbeat and deregister calls.
type ServerIDRequest struct {
	ServerID string `json:"server_id"`
}

// ServerList is the answer of GET /v1/mcp/servers.
type ServerList struct {
	Servers    []registry.Server `json:"servers"`
	NextCursor *string           `json:"next_cursor"`
	// WatchCursor is where a watch misses nothing the list did not reflect.
	WatchCursor string `json:"watch_cursor"`
}

// SkillDirectory is the answer of GET /v1/mcp/skills.
type SkillDirectory struct {
	Skills      []registry.SkillEntry `json:"skills"`
	NextCursor  *string               `json:"next_cursor"`
	WatchCursor string                `json:"watch_cursor"`
}

// SkillList is the answer of GET /v1/mcp/servers/{server_id}/skills.
type SkillList struct {
	Skills []registry.Skill `json:"skills"`
}

// EventList is the answer of GET /v1/mcp/audit.
type EventList struct {
	Events      []registry.Event `json:"events"`
	NextCursor  *string          `json:"next_cursor"`
	WatchCursor string           `json:"watch_cursor"`
}

// MaxBodyBytes caps every request body (256 KiB).
const MaxBodyBytes = 256 << 10

// Header and content types of the API.
const (
	ContentTypeJSON    = "application/json"
	ContentTypeProblem = "application/problem+json"
	HeaderTraceparent  = "traceparent"
)

// Server-Sent Events of GET /v1/mcp/watch: each audit event is sent with
// its kind as the event name; EventBookmark carries a position alone.
const (
	ContentTypeEventStream = "text/event-stream"
	EventBookmark          = "mcp.watch.bookmark"
	HeaderLastEventID      = "Last-Event-ID"
)
