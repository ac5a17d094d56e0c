package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/tracing"
)

// Attributes of the API's spans. Only ids, names and statuses: never a
// token, a capability advertisement or a skill's text.
const (
	attrTenant  = attribute.Key("mcpd.tenant_id")
	attrServer  = attribute.Key("mcpd.server_id")
	attrModule  = attribute.Key("mcpd.module_name")
	attrStatus  = attribute.Key("mcpd.server.status")
	attrTraceID = attribute.Key("mcpd.server.trace_id")
	attrCount   = attribute.Key("mcpd.result.count")
)

// serverAttrs are the attributes of a span about one server of tenant.
func serverAttrs(tenant uuid.UUID, srv registry.Server) []attribute.KeyValue {
	return []attribute.KeyValue{
		attrTenant.String(tenant.String()), attrServer.String(srv.ServerID.String()),
		attrModule.String(srv.ModuleName), attrStatus.String(string(srv.Status)), attrTraceID.String(srv.TraceID),
	}
}

// requestTraceID is the trace id a registration stores: the trace of the
// request's span (its traceparent's, or with tracing on the new trace it
// started), else the traceparent header's as registry reads it (which also
// takes one the propagator refuses, such as one with spaces around it); ""
// makes a random one. Every traceparent the propagator takes, registry
// reads to the same trace id, so tracing off stores what it always did.
func requestTraceID(r *http.Request) string {
	if id := tracing.TraceID(r.Context()); id != "" {
		return id
	}
	return registry.TraceIDFromTraceparent(r.Header.Get(HeaderTraceparent))
}

func (h *handler) register(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	var req RegisterRequest
	if p := decodeBody(w, r, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	info := registry.ServerInfo{
		ModuleName:              req.ModuleName,
		Version:                 req.Version,
		SupportedProtocols:      req.SupportedProtocols,
		CapabilityAdvertisement: req.CapabilityAdvertisement,
		Skills:                  req.Skills,
		Remotes:                 req.Remotes,
		TraceID:                 requestTraceID(r),
	}
	// Stored without the whitespace it was sent with, by either store
	// (jsonb drops it): registry.CapabilitySize counts none.
	var compact bytes.Buffer
	if c := req.CapabilityAdvertisement; len(c) > 0 && json.Compact(&compact, c) == nil {
		info.CapabilityAdvertisement = compact.Bytes()
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"description", req.Description}, {"title", req.Title}} {
		if f.v != nil && *f.v == "" {
			writeProblem(w, r, validationProblem(f.name, fmt.Sprintf("must be 1-%d characters", registry.MaxDescription)))
			return
		}
	}
	if req.Description != nil {
		info.Description = *req.Description
	}
	if req.Title != nil {
		info.Title = *req.Title
	}
	if info.Validate() == nil {
		if p := unstorableText(info); p != nil {
			writeProblem(w, r, p)
			return
		}
	}
	srv, created, err := h.reg.Register(r.Context(), claims.TenantID, info)
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	if span := h.recording(r); span != nil {
		span.SetAttributes(serverAttrs(claims.TenantID, srv)...)
		span.SetAttributes(attribute.Bool("mcpd.server.created", created))
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/mcp/servers/"+srv.ServerID.String())
	}
	h.writeJSON(w, r, status, srv)
}

func (h *handler) heartbeat(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	var req ServerIDRequest
	if p := decodeBody(w, r, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	id, p := parseServerID(req.ServerID)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	srv, err := h.reg.Heartbeat(r.Context(), claims.TenantID, id)
	h.metrics.observeHeartbeat(heartbeatResult(err))
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	if span := h.recording(r); span != nil {
		span.SetAttributes(serverAttrs(claims.TenantID, srv)...)
	}
	h.writeJSON(w, r, http.StatusOK, srv)
}

// unstorableText refuses the text that PostgreSQL cannot store and the
// memory store would take: the NUL character in a text column or a jsonb
// value (U+0000, "\u0000" in JSON), and invalid UTF-8 in the capability
// advertisement, which is kept as sent (decoded strings have it replaced
// by U+FFFD already). Without it such a registration is a 500.
func unstorableText(info registry.ServerInfo) *Problem {
	for i, s := range info.Skills {
		if strings.ContainsRune(s.Name, 0) {
			return validationProblem(fmt.Sprintf("skills[%d].name", i), "must not contain the NUL character (U+0000)")
		}
		if strings.ContainsRune(s.Description, 0) {
			return validationProblem(fmt.Sprintf("skills[%d].description", i), "must not contain the NUL character (U+0000)")
		}
	}
	if c := info.CapabilityAdvertisement; len(c) > 0 {
		if !utf8.Valid(c) {
			return validationProblem("capability_advertisement", "must be valid UTF-8")
		}
		if hasEscapedNUL(c) {
			return validationProblem("capability_advertisement", "must not contain the NUL character (\\u0000)")
		}
	}
	return nil
}

// hasEscapedNUL reports whether the JSON text raw holds a \u0000 escape
// (raw NUL bytes are not valid JSON and were refused by the decoder).
func hasEscapedNUL(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+5 < len(raw) && raw[i+1] == 'u' && string(raw[i+2:i+6]) == "0000" {
			return true
		}
		i++ // the escaped character, which may be a backslash
	}
	return false
}

// heartbeatResult is the mcpd_heartbeats_total label of a heartbeat's outcome.
func heartbeatResult(err error) string {
	switch {
	case err == nil:
		return HeartbeatOK
	case errors.Is(err, registry.ErrNotFound):
		return HeartbeatNotFound
	case errors.Is(err, registry.ErrDeregistered):
		return HeartbeatDeregistered
	default:
		return HeartbeatError
	}
}

func (h *handler) deregister(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	var req ServerIDRequest
	if p := decodeBody(w, r, &req); p != nil {
		writeProblem(w, r, p)
		return
	}
	id, p := parseServerID(req.ServerID)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	srv, err := h.reg.Deregister(r.Context(), claims.TenantID, id)
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	if span := h.recording(r); span != nil {
		span.SetAttributes(serverAttrs(claims.TenantID, srv)...)
	}
	h.writeJSON(w, r, http.StatusOK, srv)
}

func (h *handler) getServer(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	id, p := parseServerID(r.PathValue("server_id"))
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	srv, err := h.reg.Server(r.Context(), claims.TenantID, id)
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	h.writeJSON(w, r, http.StatusOK, srv)
}

func (h *handler) listSkills(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	id, p := parseServerID(r.PathValue("server_id"))
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	skills, err := h.store.Skills(r.Context(), claims.TenantID, id)
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	h.writeJSON(w, r, http.StatusOK, SkillList{Skills: skills})
}

func (h *handler) listServers(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	cc, err := h.codec(r.Context())
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	q := r.URL.Query()
	var f registry.ServerFilter
	var p *Problem
	if f.Status, p = queryStatus(q, "status"); p != nil {
		writeProblem(w, r, p)
		return
	}
	if f.ModuleName, p = queryModuleName(q); p != nil {
		writeProblem(w, r, p)
		return
	}
	if f.Limit, p = parseLimit(q); p != nil {
		writeProblem(w, r, p)
		return
	}
	if c := q.Get("cursor"); c != "" {
		after, err := cc.decodeServerCursor(claims.TenantID, c)
		if err != nil {
			writeProblem(w, r, badCursorProblem())
			return
		}
		f.After = after
	}
	page, err := h.reg.Servers(r.Context(), claims.TenantID, f)
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	if span := h.recording(r); span != nil {
		span.SetAttributes(attrTenant.String(claims.TenantID.String()), attrCount.Int(len(page.Servers)))
	}
	h.writeServerList(w, r, ServerList{
		Servers:     page.Servers,
		NextCursor:  cc.encodeServerCursor(claims.TenantID, page.Next),
		WatchCursor: cc.encodePosition(claims.TenantID, page.Horizon),
	})
}

// parseEventFilter reads the filters that the audit list and the watch
// share: server_id, module_name and kind.
// kindList names every audit event kind, for problems.
var kindList = func() string {
	names := make([]string, len(registry.EventKinds))
	for i, k := range registry.EventKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}()

func parseEventFilter(q url.Values) (registry.EventFilter, *Problem) {
	var f registry.EventFilter
	if s := q.Get("server_id"); s != "" {
		id, p := parseServerID(s)
		if p != nil {
			return f, p
		}
		f.ServerID = &id
	}
	var p *Problem
	if f.ModuleName, p = queryModuleName(q); p != nil {
		return f, p
	}
	if k := q.Get("kind"); k != "" {
		kind, err := registry.ParseEventKind(k)
		if err != nil {
			return f, validationProblem("kind", "must be one of "+kindList)
		}
		f.Kind = kind
	}
	return f, nil
}

func (h *handler) listEvents(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	cc, err := h.codec(r.Context())
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	q := r.URL.Query()
	f, p := parseEventFilter(q)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	if f.Limit, p = parseLimit(q); p != nil {
		writeProblem(w, r, p)
		return
	}
	if c := q.Get("cursor"); c != "" {
		f.After, err = h.checkCursor(r.Context(), cc, claims.TenantID, c)
		if errors.Is(err, errBadCursor) {
			writeProblem(w, r, badCursorProblem())
			return
		}
		if err != nil {
			writeProblem(w, r, h.errorProblem(r, err))
			return
		}
	}
	page, err := h.store.Events(r.Context(), claims.TenantID, f)
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	if span := h.recording(r); span != nil {
		span.SetAttributes(attrTenant.String(claims.TenantID.String()), attrCount.Int(len(page.Events)))
	}
	h.writeJSON(w, r, http.StatusOK, EventList{
		Events:      page.Events,
		NextCursor:  cc.encodeNextPosition(claims.TenantID, page.Next),
		WatchCursor: cc.encodePosition(claims.TenantID, page.Horizon),
	})
}

// checkCursor decodes a cursor into tenant's trail and checks it with the
// store: the one route of a list's and a watch's cursor. errBadCursor: not
// a cursor of this tenant's trail.
func (h *handler) checkCursor(ctx context.Context, cc *cursorCodec, tenant uuid.UUID, cursor string) (registry.Position, error) {
	pos, err := cc.decodePosition(tenant, cursor)
	if err != nil {
		return registry.Position{}, err
	}
	return h.store.CheckPosition(ctx, tenant, pos)
}

func (h *handler) findSkills(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	cc, err := h.codec(r.Context())
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	q := r.URL.Query()
	var f registry.SkillFilter
	if n := q.Get("name"); n != "" {
		if !utf8.ValidString(n) || strings.ContainsRune(n, 0) || utf8.RuneCountInString(n) > registry.MaxSkillNameLen {
			writeProblem(w, r, validationProblem("name", "must be 1-128 characters of valid UTF-8"))
			return
		}
		f.Name = n
	}
	var p *Problem
	if f.ModuleName, p = queryModuleName(q); p != nil {
		writeProblem(w, r, p)
		return
	}
	if a := q.Get("available"); a != "" {
		v, err := strconv.ParseBool(a)
		if err != nil || (a != "true" && a != "false") {
			writeProblem(w, r, validationProblem("available", "must be true or false"))
			return
		}
		f.Available = &v
	}
	if pr := q.Get("protocol"); pr != "" {
		if !registry.ValidProtocol(pr) {
			writeProblem(w, r, validationProblem("protocol", "must be an MCP revision date YYYY-MM-DD"))
			return
		}
		f.Protocol = pr
	}
	if f.ServerStatus, p = queryStatus(q, "server_status"); p != nil {
		writeProblem(w, r, p)
		return
	}
	if f.Limit, p = parseLimit(q); p != nil {
		writeProblem(w, r, p)
		return
	}
	if c := q.Get("cursor"); c != "" {
		after, err := cc.decodeSkillCursor(claims.TenantID, c)
		if err != nil {
			writeProblem(w, r, badCursorProblem())
			return
		}
		f.After = after
	}
	page, err := h.store.FindSkills(r.Context(), claims.TenantID, f)
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	if span := h.recording(r); span != nil {
		span.SetAttributes(attrTenant.String(claims.TenantID.String()), attrCount.Int(len(page.Skills)))
	}
	h.writeJSON(w, r, http.StatusOK, SkillDirectory{
		Skills:      page.Skills,
		NextCursor:  cc.encodeSkillCursor(claims.TenantID, page.Next),
		WatchCursor: cc.encodePosition(claims.TenantID, page.Horizon),
	})
}

// queryModuleName reads the module_name query parameter: empty, or a
// valid module name.
func queryModuleName(q url.Values) (string, *Problem) {
	m := q.Get("module_name")
	if m != "" && !registry.ValidModuleName(m) {
		return "", validationProblem("module_name", "must be 1-63 characters of [a-z0-9-], starting with a letter")
	}
	return m, nil
}

// queryStatus reads the query parameter name: empty, or a status.
func queryStatus(q url.Values, name string) (registry.Status, *Problem) {
	s := q.Get(name)
	if s == "" {
		return "", nil
	}
	st, err := registry.ParseStatus(s)
	if err != nil {
		return "", validationProblem(name, "must be one of healthy, degraded, unhealthy, deregistered")
	}
	return st, nil
}

func badCursorProblem() *Problem {
	return validationProblem("cursor", "is not a cursor that this listing returned")
}

// parseLimit reads the limit query parameter: 1-MaxPageLimit, default
// DefaultPageLimit.
func parseLimit(q url.Values) (int, *Problem) {
	s := q.Get("limit")
	if s == "" {
		return registry.DefaultPageLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > registry.MaxPageLimit {
		return 0, validationProblem("limit", "must be an integer from 1 to "+strconv.Itoa(registry.MaxPageLimit))
	}
	return n, nil
}
