package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/registry"
)

// The MCP registry API (/v0.1): the read side of the official MCP
// registry API for the caller's tenant, with mcpd's liveness in each
// server's _meta (docs/registry-api.md). Its own errors are
// {"error": "..."}, as that API's are; a token that is missing, invalid
// or without the scope is answered as on /v1.

// Routes of the MCP registry API, also route labels of the metrics.
const (
	RouteRegistryServers  = "GET /v0.1/servers"
	RouteRegistryVersions = "GET /v0.1/servers/{serverName}/versions"
	RouteRegistryVersion  = "GET /v0.1/servers/{serverName}/versions/{version}"
)

// registryWriteRoutes are the official API's write side: 501.
var registryWriteRoutes = []string{
	"POST /v0.1/publish",
	"PUT /v0.1/servers/{serverName}/versions/{version}",
	"DELETE /v0.1/servers/{serverName}/versions/{version}",
	"PATCH /v0.1/servers/{serverName}/versions/{version}/status",
	"PATCH /v0.1/servers/{serverName}/status",
}

// DefaultRegistryNamespace is the namespace of the registry names mcpd
// gives its servers ("<namespace>/<module_name>").
const DefaultRegistryNamespace = "local.mcpd"

// Limits of a /v0.1 list page.
const (
	DefaultRegistryLimit = 30
	MaxRegistryLimit     = 100
)

// cursorKindRegistry marks a cursor of GET /v0.1/servers.
const cursorKindRegistry = 'r'

// liveStatuses are the statuses listed by default: reachable now.
var liveStatuses = []registry.Status{registry.StatusHealthy, registry.StatusDegraded}

// registryError is an error answer of /v0.1.
type registryError struct {
	status int
	msg    string
}

func badRegistryQuery(format string, args ...any) *registryError {
	return &registryError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// writeRegistryError sends e as {"error": "..."}, with the tag of that
// body: the contract puts an ETag on every answer. Errors are never
// answered 304 (RFC 9110, section 13.2.1: If-None-Match counts only when
// the answer would be 2xx), and no-store keeps them out of caches. A 503
// carries the contract's jittered Retry-After.
func writeRegistryError(w http.ResponseWriter, e *registryError) {
	body := apiwire.RegistryError{Error: e.msg}
	b, _ := json.Marshal(body)
	if e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(apiwire.UnavailableRetryAfter()))
	}
	w.Header().Set("Content-Type", ContentTypeJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("ETag", contentTag(body))
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

// registryStoreError turns a store error into a /v0.1 error answer,
// logging what is not the client's doing.
func (h *handler) registryStoreError(w http.ResponseWriter, r *http.Request, err error) {
	p := h.errorProblem(r, err)
	writeRegistryError(w, &registryError{p.Status, p.Title})
}

// registryNotImplemented answers the write side.
func registryNotImplemented(w http.ResponseWriter, _ *http.Request) {
	writeRegistryError(w, &registryError{http.StatusNotImplemented,
		"mcpd serves the read side of the MCP registry API only: servers register with POST /v1/mcp/servers/register"})
}

// registryQuery is a parsed query of the /v0.1 reads.
type registryQuery struct {
	filter registry.CatalogFilter
	limit  int
}

// parseRegistryQuery reads the query of GET /v0.1/servers (list) or of
// the versions endpoints: each parameter at most once, known values only.
func (h *handler) parseRegistryQuery(r *http.Request, tenant uuid.UUID, list bool) (registryQuery, *registryError) {
	q := r.URL.Query()
	rq := registryQuery{limit: DefaultRegistryLimit,
		filter: registry.CatalogFilter{SearchPrefix: h.namespace + "/", Statuses: liveStatuses}}
	for name, vs := range q {
		if len(vs) > 1 {
			return rq, badRegistryQuery("query parameter %q given more than once", name)
		}
	}
	switch s := q.Get("include_deleted"); s {
	case "", "false":
	case "true":
		rq.filter.Statuses = nil
	default:
		return rq, badRegistryQuery("include_deleted must be true or false, not %q", truncateQuery(s))
	}
	if !list {
		return rq, nil
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxRegistryLimit {
			return rq, badRegistryQuery("limit must be an integer from 1 to %d, not %q", MaxRegistryLimit, truncateQuery(s))
		}
		rq.limit = n
	}
	if s := q.Get("updated_since"); s != "" {
		t, ok := parseRFC3339(s)
		if !ok {
			return rq, badRegistryQuery("updated_since must be an RFC 3339 date-time (2025-08-07T13:15:04.280Z), not %q", truncateQuery(s))
		}
		// Every server that changed, whatever its status, so that a
		// follower learns of deaths.
		rq.filter.ChangedSince, rq.filter.Statuses = &t, nil
	}
	if s := q.Get("search"); s != "" {
		if len(s) > 256 {
			return rq, badRegistryQuery("search must be at most 256 bytes")
		}
		if reason := registry.TextProblem(s); reason != "" {
			return rq, badRegistryQuery("search %s", reason)
		}
		rq.filter.Search = s
	}
	if s := q.Get("version"); s != "" && s != "latest" {
		if reason := registry.TextProblem(s); reason != "" {
			return rq, badRegistryQuery("version %s", reason)
		}
		rq.filter.Version = s
	}
	if s := q.Get("cursor"); s != "" {
		cc, err := h.codec(r.Context())
		if err != nil {
			return rq, &registryError{http.StatusServiceUnavailable, "Service unavailable"}
		}
		b, err := cc.open(tenant, s, cursorKindRegistry)
		if err != nil {
			return rq, badRegistryQuery("cursor is not a cursor of this list; use metadata.nextCursor as given")
		}
		module, rest, err := readString(b, registry.MaxModuleNameLen)
		if err != nil || len(rest) != 0 || !registry.ValidModuleName(module) {
			return rq, badRegistryQuery("cursor is not a cursor of this list; use metadata.nextCursor as given")
		}
		rq.filter.AfterModule = module
	}
	return rq, nil
}

// rfc3339RE is RFC 3339's date-time (section 5.6). Its T and Z may be
// lower case (section 5.6, note on ABNF strings being case-insensitive).
var rfc3339RE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt](\d{2}):(\d{2}):\d{2}(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$`)

// parseRFC3339 parses an RFC 3339 date-time. time.Parse alone also takes
// what RFC 3339 does not (an offset of 24 hours or more, an offset minute of
// 60, a one-digit hour, a comma before the fraction) and refuses what it
// allows (a lower-case t or z).
func parseRFC3339(s string) (time.Time, bool) {
	m := rfc3339RE.FindStringSubmatch(s)
	if m == nil || m[1] > "23" || m[2] > "59" || (m[3] != "" && (m[3] > "23" || m[4] > "59")) {
		return time.Time{}, false
	}
	// Past the match, s holds digits, '-', ':', '.', '+' and its T and Z.
	t, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
	return t, err == nil
}

func truncateQuery(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// registryList answers GET /v0.1/servers.
func (h *handler) registryList(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	rq, e := h.parseRegistryQuery(r, claims.TenantID, true)
	if e != nil {
		writeRegistryError(w, e)
		return
	}
	rq.filter.Limit = rq.limit
	tag := h.registryTag(r, claims.TenantID)
	if registryNotModified(w, r, tag) {
		return
	}
	page, err := h.catalog.Catalog(r.Context(), claims.TenantID, rq.filter)
	if err != nil {
		h.registryStoreError(w, r, err)
		return
	}
	list := h.registryServerList(page.Entries)
	if page.More && len(page.Entries) > 0 {
		cc, err := h.codec(r.Context())
		if err != nil {
			h.registryStoreError(w, r, err)
			return
		}
		last := page.Entries[len(page.Entries)-1].Server.ModuleName
		list.Metadata.NextCursor = cc.seal(claims.TenantID, appendString([]byte{cursorKindRegistry}, last))
	}
	h.writeRegistry(w, r, tag, list)
}

// registryModule reads {serverName}: "<namespace>/<module_name>", the slash
// sent as %2F. ok is false for a name that cannot be one of this tenant's.
func (h *handler) registryModule(r *http.Request) (string, bool) {
	module, found := strings.CutPrefix(r.PathValue("serverName"), h.namespace+"/")
	return module, found && registry.ValidModuleName(module)
}

// registryVersions answers GET /v0.1/servers/{serverName}/versions: the
// server's one entry, since mcpd keeps one version per server.
func (h *handler) registryVersions(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	if tag, en, ok := h.registryEntryFor(w, r, claims, ""); ok {
		h.writeRegistry(w, r, tag, h.registryServerList([]registry.CatalogEntry{en}))
	}
}

// registryVersion answers GET /v0.1/servers/{serverName}/versions/{version}.
func (h *handler) registryVersion(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	version := r.PathValue("version")
	if version == "" {
		writeRegistryError(w, &registryError{http.StatusNotFound, "Server version not found"})
		return
	}
	if tag, en, ok := h.registryEntryFor(w, r, claims, version); ok {
		h.writeRegistry(w, r, tag, h.registryServerResponse(en))
	}
}

// registryEntryFor takes a versions endpoint up to its entry (version ""
// for any): the query, the tag, then the store. ok is false when it has
// answered already: an error, or 304 for an exact tag.
func (h *handler) registryEntryFor(w http.ResponseWriter, r *http.Request, claims auth.Claims,
	version string) (tag string, en registry.CatalogEntry, ok bool) {
	rq, e := h.registryEntryQuery(r, claims)
	if e != nil {
		writeRegistryError(w, e)
		return "", en, false
	}
	tag = h.registryTag(r, claims.TenantID)
	if registryNotModified(w, r, tag) {
		return "", en, false
	}
	if en, e = h.registryEntry(r, claims, rq, version); e != nil {
		writeRegistryError(w, e)
		return "", en, false
	}
	return tag, en, true
}

// registryEntryQuery reads the query and the server name of a versions
// endpoint, without the store: a request that is an error is answered as
// one before any conditional answer.
func (h *handler) registryEntryQuery(r *http.Request, claims auth.Claims) (registryQuery, *registryError) {
	rq, e := h.parseRegistryQuery(r, claims.TenantID, false)
	if e != nil {
		return rq, e
	}
	module, ok := h.registryModule(r)
	if !ok {
		return rq, &registryError{http.StatusNotFound, "Server not found"}
	}
	rq.filter.ModuleName, rq.filter.Limit = module, 1
	return rq, nil
}

// registryEntry reads the one server that rq names, at version ("latest"
// or "": any). A server that is not reachable now (unhealthy or
// deregistered) is found with include_deleted=true only, as on the list.
func (h *handler) registryEntry(r *http.Request, claims auth.Claims, rq registryQuery, version string) (registry.CatalogEntry, *registryError) {
	page, err := h.catalog.Catalog(r.Context(), claims.TenantID, rq.filter)
	if err != nil {
		p := h.errorProblem(r, err)
		return registry.CatalogEntry{}, &registryError{p.Status, p.Title}
	}
	if len(page.Entries) == 0 {
		return registry.CatalogEntry{}, &registryError{http.StatusNotFound, "Server not found"}
	}
	en := page.Entries[0]
	if version != "" && version != "latest" && version != en.Server.Version {
		return registry.CatalogEntry{}, &registryError{http.StatusNotFound, "Server version not found"}
	}
	return en, nil
}

func (h *handler) registryServerList(entries []registry.CatalogEntry) apiwire.RegistryServerList {
	list := apiwire.RegistryServerList{Servers: make([]apiwire.RegistryServerResponse, len(entries))}
	for i, en := range entries {
		list.Servers[i] = h.registryServerResponse(en)
	}
	list.Metadata.Count = len(list.Servers)
	return list
}

// registryServerResponse is en as a ServerResponse of the official API.
func (h *handler) registryServerResponse(en registry.CatalogEntry) apiwire.RegistryServerResponse {
	srv := en.Server
	if h.reg != nil {
		srv = h.reg.WithHeld(srv)
	}
	desc := srv.Description
	if desc == "" {
		desc = "MCP server " + srv.ModuleName
	}
	remotes := srv.Remotes
	if remotes == nil {
		remotes = []registry.Remote{}
	}
	protocols := srv.SupportedProtocols
	if protocols == nil {
		protocols = []string{}
	}
	skills := en.Skills
	if skills == nil {
		skills = []registry.SkillState{}
	}
	official := apiwire.RegistryOfficial{Status: apiwire.OfficialStatusActive,
		PublishedAt: srv.RegisteredAt, UpdatedAt: en.StatusChangedAt, IsLatest: true}
	if srv.Status == registry.StatusDeregistered {
		official.Status = apiwire.OfficialStatusDeleted
	}
	return apiwire.RegistryServerResponse{
		Server: apiwire.RegistryServer{
			Schema: apiwire.ServerSchemaURL, Name: h.namespace + "/" + srv.ModuleName,
			Description: desc, Title: srv.Title, Version: srv.Version, Remotes: remotes,
		},
		Meta: apiwire.RegistryMeta{Official: official, Health: apiwire.RegistryHealth{
			ServerID: srv.ServerID, Status: srv.Status, LastHeartbeatAt: srv.LastHeartbeatAt,
			StatusChangedAt: en.StatusChangedAt, RegisteredAt: srv.RegisteredAt,
			SupportedProtocols: protocols, Skills: skills,
		}},
	}
}
