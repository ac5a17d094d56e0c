package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// ServerSource reads a tenant's servers as the API shows them: the
// Registrar, which reports the heartbeat interval in each.
type ServerSource interface {
	Server(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, error)
	Servers(ctx context.Context, tenant uuid.UUID, f registry.ServerFilter) (registry.ServerPage, error)
}

// SkillSource reads a tenant's skills: the store.
type SkillSource interface {
	Skills(ctx context.Context, tenant, serverID uuid.UUID) ([]registry.Skill, error)
	FindSkills(ctx context.Context, tenant uuid.UUID, f registry.SkillFilter) (registry.SkillPage, error)
}

// Reader is what the endpoint reads of the registry.
type Reader struct {
	ServerSource
	SkillSource
}

// Tool names.
const (
	ToolFindSkill   = "find_skill"
	ToolListServers = "list_servers"
	ToolGetServer   = "get_server"
)

// maxListed bounds the servers of one list_servers answer and the
// providers of one skill.
const maxListed = registry.MaxPageLimit

// FindSkillInput is the arguments of find_skill.
type FindSkillInput struct {
	Name     string `json:"name" jsonschema:"the skill's name"`
	Protocol string `json:"protocol,omitempty" jsonschema:"only servers that list this MCP revision (YYYY-MM-DD)"`
}

// Provider is a live server that offers a skill.
type Provider struct {
	ModuleName         string   `json:"module_name"`
	ServerID           string   `json:"server_id"`
	Status             string   `json:"status" jsonschema:"healthy or degraded"`
	Version            string   `json:"version"`
	SupportedProtocols []string `json:"supported_protocols"`
	// Remotes is where the server is reached ([] when it did not say).
	Remotes []registry.Remote `json:"remotes"`
}

// Providers is the answer of find_skill and the content of
// mcpd://skills/{name}: the live providers of a skill, healthy first.
type Providers struct {
	Skill     string     `json:"skill"`
	Providers []Provider `json:"providers"`
}

// ListServersInput is the arguments of list_servers.
type ListServersInput struct {
	Status     string `json:"status,omitempty" jsonschema:"healthy, degraded, unhealthy or deregistered; empty: every status"`
	ModuleName string `json:"module_name,omitempty" jsonschema:"only the server of this module"`
}

// ServerSummary is a server as the MCP endpoint shows it (the API's
// server object without its capability advertisement).
type ServerSummary struct {
	ServerID           string   `json:"server_id"`
	ModuleName         string   `json:"module_name"`
	Status             string   `json:"status"`
	Version            string   `json:"version"`
	SupportedProtocols []string `json:"supported_protocols"`
	// Remotes is where the server is reached ([] when it did not say).
	Remotes         []registry.Remote `json:"remotes"`
	LastHeartbeatAt string            `json:"last_heartbeat_at"`
	RegisteredAt    string            `json:"registered_at"`
	DeregisteredAt  *string           `json:"deregistered_at"`
}

// ServerList is the answer of list_servers, ordered by module name.
type ServerList struct {
	Servers []ServerSummary `json:"servers"`
	// Truncated says that more servers matched than one answer holds.
	Truncated bool `json:"truncated"`
}

// GetServerInput is the arguments of get_server: one of the two.
type GetServerInput struct {
	ServerID   string `json:"server_id,omitempty" jsonschema:"the server's id (UUID)"`
	ModuleName string `json:"module_name,omitempty" jsonschema:"the server's module name"`
}

// SkillState is one skill of a server and whether it can be used now.
type SkillState struct {
	Name              string  `json:"name"`
	Description       string  `json:"description"`
	Available         bool    `json:"available"`
	UnavailableReason *string `json:"unavailable_reason"`
}

// ServerDetail is the answer of get_server and the content of
// mcpd://servers/{module_name}.
type ServerDetail struct {
	Server ServerSummary `json:"server"`
	Skills []SkillState  `json:"skills"`
	// Availability24h is what the server delivered over the last 24 hours
	// (get_server only; GET /v1/mcp/servers/{server_id}/availability), when
	// the Reader's SkillSource is also a store.AvailabilityReader.
	Availability24h *registry.Availability `json:"availability_24h,omitempty"`
}

// errNotFound is a tool error: no such server of the caller's tenant.
var errNotFound = errors.New("not found")

// tools adds the three tools to s for tenant.
func (t *tenant) addTools(s *mcp.Server) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolFindSkill,
		Title:       "Find a live skill",
		Description: "The MCP servers that offer a skill and are alive now (healthy or degraded), healthy first. No live provider: an empty list.",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in FindSkillInput) (*mcp.CallToolResult, Providers, error) {
		ctx, cancel := context.WithTimeout(ctx, t.timeout)
		defer cancel()
		if err := checkSkillName(in.Name); err != nil {
			return nil, Providers{}, err
		}
		if in.Protocol != "" && !registry.ValidProtocol(in.Protocol) {
			return nil, Providers{}, errors.New("protocol must be an MCP revision date YYYY-MM-DD")
		}
		p, err := t.providers(ctx, in.Name, in.Protocol)
		if err != nil {
			return nil, Providers{}, err
		}
		return textResult(renderProviders(p)), p, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolListServers,
		Title:       "List servers",
		Description: "The tenant's registered MCP servers by module name, of every status unless one is given.",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in ListServersInput) (*mcp.CallToolResult, ServerList, error) {
		ctx, cancel := context.WithTimeout(ctx, t.timeout)
		defer cancel()
		f := registry.ServerFilter{ModuleName: in.ModuleName, Limit: maxListed}
		if in.Status != "" {
			st, err := registry.ParseStatus(in.Status)
			if err != nil {
				return nil, ServerList{}, errors.New("status must be healthy, degraded, unhealthy or deregistered")
			}
			f.Status = st
		}
		if in.ModuleName != "" && !registry.ValidModuleName(in.ModuleName) {
			return nil, ServerList{}, errors.New("module_name is not a valid module name")
		}
		page, err := t.reader.Servers(ctx, t.id, f)
		if err != nil {
			return nil, ServerList{}, t.fault(ctx, "list servers", err)
		}
		out := ServerList{Servers: make([]ServerSummary, 0, len(page.Servers)), Truncated: page.Next != nil}
		for _, srv := range page.Servers {
			out.Servers = append(out.Servers, summarize(srv))
		}
		return textResult(renderServers(out)), out, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolGetServer,
		Title:       "Get a server",
		Description: "One server, by server_id or module_name, with its skills. An unknown server is a tool error.",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in GetServerInput) (*mcp.CallToolResult, ServerDetail, error) {
		ctx, cancel := context.WithTimeout(ctx, t.timeout)
		defer cancel()
		var (
			d   ServerDetail
			err error
		)
		switch {
		case (in.ServerID == "") == (in.ModuleName == ""):
			return nil, d, errors.New("give exactly one of server_id and module_name")
		case in.ServerID != "":
			id, perr := uuid.Parse(in.ServerID)
			if perr != nil {
				return nil, d, errors.New("server_id must be a UUID")
			}
			d, err = t.serverByID(ctx, id)
		default:
			d, err = t.serverByModule(ctx, in.ModuleName)
		}
		if errors.Is(err, errNotFound) {
			what := "server_id " + in.ServerID
			if in.ServerID == "" {
				what = "module_name " + in.ModuleName
			}
			return nil, d, fmt.Errorf("no server with %s", what)
		}
		if err != nil {
			return nil, d, err
		}
		if ar, ok := t.reader.SkillSource.(store.AvailabilityReader); ok {
			id, _ := uuid.Parse(d.Server.ServerID)
			a, err := ar.ServerAvailability(ctx, t.id, id, registry.AvailabilityRequest{Window: registry.Window24h})
			if err != nil {
				return nil, d, t.fault(ctx, "get server availability", err)
			}
			d.Availability24h = &a
		}
		return textResult(renderServer(d)), d, nil
	})
}

func checkSkillName(name string) error {
	if name == "" || !utf8.ValidString(name) || strings.ContainsRune(name, 0) ||
		utf8.RuneCountInString(name) > registry.MaxSkillNameLen {
		return fmt.Errorf("name must be 1-%d characters of valid UTF-8", registry.MaxSkillNameLen)
	}
	return nil
}

// providers returns the live providers of a skill, healthy first.
func (t *tenant) providers(ctx context.Context, name, protocol string) (Providers, error) {
	avail := true
	out := Providers{Skill: name, Providers: []Provider{}}
	f := registry.SkillFilter{Name: name, Protocol: protocol, Available: &avail, Limit: maxListed}
	for range maxPages {
		page, err := t.reader.FindSkills(ctx, t.id, f)
		if err != nil {
			return Providers{}, t.fault(ctx, "find skill", err)
		}
		for _, sk := range page.Skills {
			if sk.ServerStatus != registry.StatusHealthy && sk.ServerStatus != registry.StatusDegraded {
				continue
			}
			out.Providers = append(out.Providers, Provider{
				ModuleName: sk.ModuleName, ServerID: sk.ServerID.String(), Status: string(sk.ServerStatus),
				Version: sk.Version, SupportedProtocols: nonNil(sk.SupportedProtocols), Remotes: remotes(sk.Remotes),
			})
		}
		if page.Next == nil {
			break
		}
		f.After = page.Next
	}
	slices.SortStableFunc(out.Providers, func(a, b Provider) int {
		ah, bh := a.Status == string(registry.StatusHealthy), b.Status == string(registry.StatusHealthy)
		switch {
		case ah && !bh:
			return -1
		case bh && !ah:
			return 1
		}
		return strings.Compare(a.ModuleName, b.ModuleName)
	})
	return out, nil
}

// maxPages bounds the pages one answer reads.
const maxPages = 10

func (t *tenant) serverByID(ctx context.Context, id uuid.UUID) (ServerDetail, error) {
	srv, err := t.reader.Server(ctx, t.id, id)
	if errors.Is(err, registry.ErrNotFound) {
		return ServerDetail{}, errNotFound
	}
	if err != nil {
		return ServerDetail{}, t.fault(ctx, "get server", err)
	}
	return t.detail(ctx, srv)
}

func (t *tenant) serverByModule(ctx context.Context, module string) (ServerDetail, error) {
	if !registry.ValidModuleName(module) {
		return ServerDetail{}, errNotFound
	}
	page, err := t.reader.Servers(ctx, t.id, registry.ServerFilter{ModuleName: module, Limit: 1})
	if err != nil {
		return ServerDetail{}, t.fault(ctx, "get server", err)
	}
	if len(page.Servers) == 0 {
		return ServerDetail{}, errNotFound
	}
	return t.detail(ctx, page.Servers[0])
}

func (t *tenant) detail(ctx context.Context, srv registry.Server) (ServerDetail, error) {
	skills, err := t.reader.Skills(ctx, t.id, srv.ServerID)
	if errors.Is(err, registry.ErrNotFound) {
		return ServerDetail{}, errNotFound
	}
	if err != nil {
		return ServerDetail{}, t.fault(ctx, "get server skills", err)
	}
	d := ServerDetail{Server: summarize(srv), Skills: make([]SkillState, 0, len(skills))}
	for _, sk := range skills {
		d.Skills = append(d.Skills, SkillState{Name: sk.Name, Description: sk.Description, Available: sk.Available,
			UnavailableReason: sk.UnavailableReason})
	}
	return d, nil
}

// fault logs a store failure and returns what the caller is told: never
// the cause itself.
func (t *tenant) fault(ctx context.Context, what string, err error) error {
	if ctx.Err() == nil {
		t.logger.ErrorContext(ctx, "mcp: "+what, "tenant_id", t.id.String(), "err", err)
	}
	return errors.New(what + ": the registry is unavailable; try again")
}

func summarize(s registry.Server) ServerSummary {
	out := ServerSummary{
		ServerID: s.ServerID.String(), ModuleName: s.ModuleName, Status: string(s.Status), Version: s.Version,
		SupportedProtocols: nonNil(s.SupportedProtocols), Remotes: remotes(s.Remotes),
		LastHeartbeatAt: s.LastHeartbeatAt.UTC().Format(time.RFC3339Nano),
		RegisteredAt:    s.RegisteredAt.UTC().Format(time.RFC3339Nano),
	}
	if s.DeregisteredAt != nil {
		d := s.DeregisteredAt.UTC().Format(time.RFC3339Nano)
		out.DeregisteredAt = &d
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func remotes(r []registry.Remote) []registry.Remote {
	if r == nil {
		return []registry.Remote{}
	}
	return r
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// The short text renderings, for hosts that show text to a model.

func renderProviders(p Providers) string {
	if len(p.Providers) == 0 {
		return fmt.Sprintf("No live provider of skill %q.", p.Skill)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d live provider(s) of skill %q:", len(p.Providers), p.Skill)
	for _, pr := range p.Providers {
		fmt.Fprintf(&b, "\n- %s %s (%s, server %s)", pr.ModuleName, pr.Version, pr.Status, pr.ServerID)
		for _, r := range pr.Remotes {
			fmt.Fprintf(&b, " %s %s", r.Type, r.URL)
		}
	}
	return b.String()
}

func renderServers(l ServerList) string {
	if len(l.Servers) == 0 {
		return "No server."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d server(s):", len(l.Servers))
	for _, s := range l.Servers {
		fmt.Fprintf(&b, "\n- %s %s: %s", s.ModuleName, s.Version, s.Status)
	}
	if l.Truncated {
		b.WriteString("\n(more servers match; narrow by status or module_name)")
	}
	return b.String()
}

func renderServer(d ServerDetail) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s (server %s)", d.Server.ModuleName, d.Server.Version, d.Server.Status, d.Server.ServerID)
	if a := d.Availability24h; a != nil && a.AvailableRatio != nil {
		// As mcpctl and the board show it (output.Percent).
		fmt.Fprintf(&b, "\navailable over the last 24h: %s%% (%d outages)", strconv.FormatFloat(*a.AvailableRatio*100, 'f', 3, 64), len(a.Outages))
	}
	for _, sk := range d.Skills {
		state := "available"
		if !sk.Available {
			state = "unavailable"
		}
		fmt.Fprintf(&b, "\n- skill %s: %s", sk.Name, state)
	}
	return b.String()
}
