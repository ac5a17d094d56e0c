package api

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/registry"
)

// The availability routes (docs/availability.md).
const (
	RouteServerAvailability = "GET /v1/mcp/servers/{server_id}/availability"
	RouteSkillAvailability  = "GET /v1/mcp/skills/{name}/availability"
	RouteAvailability       = "GET /v1/mcp/availability"
)

// queryWindow reads the window parameter: 1h, 24h (the default), 7d or
// 30d.
func queryWindow(r *http.Request) (registry.AvailabilityWindow, *Problem) {
	w, err := registry.ParseAvailabilityWindow(r.URL.Query().Get("window"))
	if err != nil {
		return "", validationProblem("window", "must be one of 1h, 24h, 7d, 30d")
	}
	return w, nil
}

func (h *handler) serverAvailability(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	id, p := parseServerID(r.PathValue("server_id"))
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	win, p := queryWindow(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	a, err := h.store.ServerAvailability(r.Context(), claims.TenantID, id, registry.AvailabilityRequest{Window: win})
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	h.writeJSON(w, r, http.StatusOK, a)
}

func (h *handler) skillAvailability(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	name := r.PathValue("name")
	if name == "" || !utf8.ValidString(name) || strings.ContainsRune(name, 0) || utf8.RuneCountInString(name) > registry.MaxSkillNameLen {
		writeProblem(w, r, validationProblem("name", "must be 1-128 characters of valid UTF-8"))
		return
	}
	win, p := queryWindow(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	a, err := h.store.SkillAvailability(r.Context(), claims.TenantID, name, registry.AvailabilityRequest{Window: win})
	if errors.Is(err, registry.ErrSkillNotFound) {
		writeProblem(w, r, newProblem(http.StatusNotFound, ProblemNotFound, "Skill not found",
			"no server of the token's tenant offers a skill of this name"))
		return
	}
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	h.writeJSON(w, r, http.StatusOK, a)
}

// availabilityRatios answers the available share of a window of the
// servers named by server_ids (1 to 100 of them, separated by commas), for
// lists: one statement on PostgreSQL.
func (h *handler) availabilityRatios(w http.ResponseWriter, r *http.Request, claims auth.Claims) {
	win, p := queryWindow(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	list := r.URL.Query().Get("server_ids")
	raw := strings.Split(list, ",")
	if list == "" || len(raw) > registry.MaxAvailabilityRatios {
		writeProblem(w, r, validationProblem("server_ids", "must be 1 to 100 server ids, separated by commas"))
		return
	}
	ids := make([]uuid.UUID, len(raw))
	for i, s := range raw {
		id, err := uuid.Parse(s)
		if len(s) != 36 || err != nil {
			writeProblem(w, r, validationProblem("server_ids", "must be 1 to 100 server ids, separated by commas"))
			return
		}
		ids[i] = id
	}
	ratios, err := h.store.AvailabilityRatios(r.Context(), claims.TenantID, ids, registry.AvailabilityRequest{Window: win})
	if err != nil {
		writeProblem(w, r, h.errorProblem(r, err))
		return
	}
	out := apiwire.AvailabilityList{Window: win, Servers: ratios}
	h.writeJSON(w, r, http.StatusOK, out)
}
