package registry

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// SkillInfo names a skill that a registration says the server offers.
type SkillInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Remote is where a server is reached, in the official MCP registry's
// server.json terms: a transport type (RemoteStreamableHTTP or RemoteSSE)
// and an absolute http or https URL.
type Remote struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// The transport types of a Remote.
const (
	RemoteStreamableHTTP = "streamable-http"
	RemoteSSE            = "sse"
)

// ServerInfo is what a server says of itself when it registers.
type ServerInfo struct {
	ModuleName              string
	Version                 string
	SupportedProtocols      []string
	CapabilityAdvertisement json.RawMessage // a JSON object, or nil
	Skills                  []SkillInfo     // the complete set; skills not named are removed
	// Remotes, Description and Title replace the server's own on every
	// registration; none is the empty list or string.
	Remotes     []Remote
	Description string
	Title       string
	TraceID     string // 32 lowercase hex; empty: the store makes one
}

// Server is a registered MCP server, as the API returns it.
type Server struct {
	ServerID                uuid.UUID       `json:"server_id"`
	TenantID                uuid.UUID       `json:"tenant_id"`
	ModuleName              string          `json:"module_name"`
	Version                 string          `json:"version"`
	SupportedProtocols      []string        `json:"supported_protocols"`
	CapabilityAdvertisement json.RawMessage `json:"capability_advertisement"`
	Status                  Status          `json:"status"`
	LastHeartbeatAt         time.Time       `json:"last_heartbeat_at"`
	RegisteredAt            time.Time       `json:"registered_at"`
	DeregisteredAt          *time.Time      `json:"deregistered_at"`
	TraceID                 string          `json:"trace_id"`
	HeartbeatIntervalSecs   float64         `json:"heartbeat_interval_seconds"`
	// Remotes is where the server is reached, [] when it did not say.
	Remotes     []Remote `json:"remotes"`
	Description string   `json:"description,omitempty"`
	Title       string   `json:"title,omitempty"`
}

// Reasons a skill is unavailable that mcpd itself sets and a recovery undoes.
// Any other reason belongs to the skill and is left alone.
const (
	ReasonServerUnhealthy    = "server_unhealthy"
	ReasonServerDeregistered = "server_deregistered"
)

// Skill is one skill of a server and whether it can be used now.
type Skill struct {
	SkillID           uuid.UUID `json:"skill_id"`
	ServerID          uuid.UUID `json:"server_id"`
	Name              string    `json:"name"`
	Description       string    `json:"description"`
	Available         bool      `json:"available"`
	UnavailableReason *string   `json:"unavailable_reason"`
}

// EventKinds lists the kinds of Kinds, in its order.
var EventKinds = eventKinds()

// ParseEventKind returns the kind named s, or an error for anything else.
func ParseEventKind(s string) (EventKind, error) {
	for _, k := range EventKinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", &unknownKindError{s}
}

type unknownKindError struct{ kind string }

func (e *unknownKindError) Error() string { return "unknown audit kind " + `"` + e.kind + `"` }

// EventBody describes the server at the time of an event: module, version
// and protocols only, never capabilities, tokens or addresses.
type EventBody struct {
	ServerID           uuid.UUID `json:"server_id"`
	ModuleName         string    `json:"module_name"`
	Status             Status    `json:"status"`
	Version            string    `json:"version"`
	SupportedProtocols []string  `json:"supported_protocols"`
	SkillsAffected     []string  `json:"skills_affected"`
}

// Event is one entry of the append-only audit trail: one per transition.
type Event struct {
	Seq        int64     `json:"-"` // the store's sequence number of the event
	Position   Position  `json:"-"` // where it stands in commit order; set by reads of the trail
	EventID    uuid.UUID `json:"event_id"`
	TenantID   uuid.UUID `json:"-"`
	Kind       EventKind `json:"kind"`
	ServerID   uuid.UUID `json:"server_id"`
	ModuleName string    `json:"module_name"`
	FromStatus *Status   `json:"from_status"`
	ToStatus   Status    `json:"to_status"`
	TraceID    string    `json:"trace_id"`
	OccurredAt time.Time `json:"occurred_at"`
	Body       EventBody `json:"body"`
}

// ServerFilter selects servers of one tenant, ordered by module name.
type ServerFilter struct {
	Status     Status // empty: any
	ModuleName string // empty: any
	Limit      int
	After      *ServerCursor
	// MaxBytes bounds the capability advertisements of the page: it ends
	// after the server whose advertisement reaches it, with a cursor to the
	// rest, however many servers Limit allows. 0: MaxPageBytes.
	MaxBytes int
}

// ServerCursor is the position after which a page of servers starts.
type ServerCursor struct {
	ModuleName string
	ServerID   uuid.UUID
}

// ServerPage is one page of servers and the cursor of the next, if any.
type ServerPage struct {
	Servers []Server
	Next    *ServerCursor
	// Horizon is a position from which a watch misses no change that the
	// page does not reflect.
	Horizon Position
}

// SkillFilter selects skills across one tenant's servers, ordered by name
// and then module name.
type SkillFilter struct {
	Name         string // empty: any
	ModuleName   string // empty: any
	Available    *bool  // nil: either
	Protocol     string // empty: any; else servers that list this revision
	ServerStatus Status // empty: any
	Limit        int
	After        *SkillCursor
}

// SkillCursor is the position after which a page of skills starts: a
// module offers at most one skill of a name.
type SkillCursor struct {
	Name       string
	ModuleName string
}

// SkillEntry is a skill with what a router needs to know of its server.
type SkillEntry struct {
	Skill
	ModuleName         string   `json:"module_name"`
	ServerStatus       Status   `json:"server_status"`
	Version            string   `json:"version"`
	SupportedProtocols []string `json:"supported_protocols"`
	// Remotes is where the skill's server is reached, [] when it did not say.
	Remotes []Remote `json:"remotes"`
}

// SkillPage is one page of skills, the cursor of the next, and the horizon
// from which a watch misses nothing the page does not reflect.
type SkillPage struct {
	Skills  []SkillEntry
	Next    *SkillCursor
	Horizon Position
}

// EventFilter selects audit events of one tenant, in commit order.
type EventFilter struct {
	ServerID   *uuid.UUID
	ModuleName string    // empty: any
	Kind       EventKind // empty: any
	Limit      int
	// After is the position the page starts after; the zero Position is
	// the start of the trail.
	After Position
}

// Matches reports whether ev is selected by f's server, module and kind.
func (f EventFilter) Matches(ev *Event) bool {
	return (f.ServerID == nil || *f.ServerID == ev.ServerID) &&
		(f.ModuleName == "" || f.ModuleName == ev.ModuleName) &&
		(f.Kind == "" || f.Kind == ev.Kind)
}

// EventPage is one page of events in commit order.
type EventPage struct {
	Events []Event
	// Next is the position to continue after when the page is full.
	Next *Position
	// Horizon is where a watch that follows this page starts: after the
	// last event of a full page, else past everything the page reflects.
	Horizon Position
}

// Limits of a listing page.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
	// MaxPageBytes bounds the capability advertisements of one page of
	// servers (ServerFilter.MaxBytes), so that a page of large servers
	// stays a few MiB: with advertisements of up to 256 KiB (the body
	// limit), a page holds at most MaxPageBytes + 256 KiB of them.
	MaxPageBytes = 4 << 20
)

// PageBytes is f's byte bound: MaxBytes, or MaxPageBytes when unset.
func (f ServerFilter) PageBytes() int {
	if f.MaxBytes <= 0 {
		return MaxPageBytes
	}
	return f.MaxBytes
}

// CatalogFilter selects a tenant's servers for the MCP registry API
// (/v0.1), ordered by module name.
type CatalogFilter struct {
	Statuses []Status // empty: any
	// ChangedSince, when set, selects the servers whose registration or
	// status changed at or after it (StatusChangedAt).
	ChangedSince *time.Time
	// Search, when set, selects the servers whose SearchPrefix + module
	// name holds it, ignoring case.
	Search       string
	SearchPrefix string
	Version      string // empty: any; else exactly this version
	ModuleName   string // empty: any
	AfterModule  string // the page starts after this module name
	Limit        int
}

// SkillState is a skill's name and whether it can be used now.
type SkillState struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
}

// CatalogEntry is a server as the MCP registry API shows it: the server,
// when its registration or status last changed (the time of its latest
// audit event), and its skills by name.
type CatalogEntry struct {
	Server          Server
	StatusChangedAt time.Time
	Skills          []SkillState
}

// CatalogPage is one page of a catalog read; More reports that servers
// follow the last one.
type CatalogPage struct {
	Entries []CatalogEntry
	More    bool
}
