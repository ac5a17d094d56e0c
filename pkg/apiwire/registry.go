package apiwire

import (
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// The MCP registry API (/v0.1): the read side of the official MCP registry
// API (OpenAPI "MCP Server Registry API" 2025-12-01) for the caller's
// tenant, in that API's own shapes and names.

// ServerSchemaURL is the server.json schema every RegistryServer names.
const ServerSchemaURL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"

// HealthMetaKey is the key of mcpd's own block in a ServerResponse's _meta.
const HealthMetaKey = "io.cyberos.mcpd/health"

// RegistryServerList is the answer of GET /v0.1/servers and
// GET /v0.1/servers/{serverName}/versions.
type RegistryServerList struct {
	Servers  []RegistryServerResponse `json:"servers"`
	Metadata RegistryMetadata         `json:"metadata"`
}

// RegistryMetadata pages a RegistryServerList: NextCursor is absent on the
// last page; Count is the number of servers of this page.
type RegistryMetadata struct {
	NextCursor string `json:"nextCursor,omitempty"`
	Count      int    `json:"count"`
}

// RegistryServerResponse is one server: its server.json and mcpd's
// health block.
type RegistryServerResponse struct {
	Server RegistryServer `json:"server"`
	Meta   RegistryMeta   `json:"_meta"`
}

// RegistryServer is a server as a server.json (schema 2025-12-11)
// describes it.
type RegistryServer struct {
	Schema      string            `json:"$schema"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Title       string            `json:"title,omitempty"`
	Version     string            `json:"version"`
	Remotes     []registry.Remote `json:"remotes"`
}

// OfficialMetaKey is the key of the registry-set block that the official
// API defines in a ServerResponse's _meta.
const OfficialMetaKey = "io.modelcontextprotocol.registry/official"

// Statuses of the official block: mcpd sends active, or deleted for a
// deregistered server.
const (
	OfficialStatusActive  = "active"
	OfficialStatusDeleted = "deleted"
)

// RegistryMeta is the _meta of a RegistryServerResponse: the official
// block, for clients that read only the official shape, and mcpd's
// health block.
type RegistryMeta struct {
	Official RegistryOfficial `json:"io.modelcontextprotocol.registry/official"`
	Health   RegistryHealth   `json:"io.cyberos.mcpd/health"`
}

// RegistryOfficial is the registry-set block of the official API
// (OpenAPI 2025-12-01, ServerResponse._meta): the lifecycle status of the
// entry (active, or deleted once deregistered), when it was first
// registered, when it last changed, and that it is the server's latest
// version, which mcpd's one entry per server always is.
type RegistryOfficial struct {
	Status      string    `json:"status"`
	PublishedAt time.Time `json:"publishedAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	IsLatest    bool      `json:"isLatest"`
}

// RegistryHealth is what mcpd knows of a server's liveness, which the
// official registry does not record.
type RegistryHealth struct {
	ServerID           uuid.UUID             `json:"serverId"`
	Status             registry.Status       `json:"status"`
	LastHeartbeatAt    time.Time             `json:"lastHeartbeatAt"`
	StatusChangedAt    time.Time             `json:"statusChangedAt"`
	RegisteredAt       time.Time             `json:"registeredAt"`
	SupportedProtocols []string              `json:"supportedProtocols"`
	Skills             []registry.SkillState `json:"skills"`
}

// RegistryError is every error answer of /v0.1 that the API itself makes.
type RegistryError struct {
	Error string `json:"error"`
}
