package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/apiwire"
)

// The ETag of the MCP registry API's answers (docs/registry-api.md):
//
//   - From the feed, without reading the store: a hash of the format, the
//     namespace, the tenant, the request (route and query) and the
//     tenant's version as this process's change-feed hub knows it (the
//     position of the tenant's latest audit event, the same on every
//     replica, and the events this process wrote that the hub has not read
//     yet). Every registration and transition writes an audit event, and a
//     heartbeat that changes nothing else writes none: the tag changes with
//     every change of the answer but lastHeartbeatAt. A repeated poll is
//     answered 304 from memory, at no cost to the database.
//   - From the answer, when the hub cannot say (not started yet, or no
//     hub): a hash of the answer with every lastHeartbeatAt left out.
//
// The tag is computed before the store is read: an answer is never older
// than its tag says.

// registryTagFormat changes whenever the answers of /v0.1 change shape, so
// that a tag of an older build is never taken for a current one.
const registryTagFormat = "mcpd-v0.1-1"

// registryTag is the tag of r's answer derived from the feed, or "" when
// the hub cannot say.
func (h *handler) registryTag(r *http.Request, tenant uuid.UUID) string {
	if h.feed == nil || h.catalog == nil {
		return ""
	}
	v, err := h.feed.TenantVersion(r.Context(), tenant, h.catalog)
	if err != nil {
		return ""
	}
	sum := sha256.New()
	var b []byte
	for _, s := range []string{registryTagFormat, h.namespace, r.Pattern, r.URL.EscapedPath(), r.URL.Query().Encode()} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, tenant[:]...)
	b = binary.BigEndian.AppendUint64(b, v.Latest.Epoch)
	b = binary.BigEndian.AppendUint64(b, v.Latest.TxID)
	b = binary.BigEndian.AppendUint64(b, uint64(v.Latest.Seq))
	for _, id := range v.Pending {
		b = append(b, id[:]...)
	}
	sum.Write(b)
	return `"f` + base64.RawURLEncoding.EncodeToString(sum.Sum(nil)[:18]) + `"`
}

// contentTag is the tag of an answer made from the answer itself: every
// lastHeartbeatAt left out.
func contentTag(v any) string {
	sum := sha256.New()
	_ = json.NewEncoder(sum).Encode(withoutHeartbeats(v))
	return `"c` + base64.RawURLEncoding.EncodeToString(sum.Sum(nil)[:18]) + `"`
}

// withoutHeartbeats is v with its lastHeartbeatAt times zeroed.
func withoutHeartbeats(v any) any {
	switch a := v.(type) {
	case apiwire.RegistryServerList:
		servers := make([]apiwire.RegistryServerResponse, len(a.Servers))
		for i, s := range a.Servers {
			s.Meta.Health.LastHeartbeatAt = time.Time{}
			servers[i] = s
		}
		a.Servers = servers
		// The cursor is sealed anew on every answer: its place is what counts.
		if a.Metadata.NextCursor != "" {
			a.Metadata.NextCursor = "more"
		}
		return a
	case apiwire.RegistryServerResponse:
		a.Meta.Health.LastHeartbeatAt = time.Time{}
		return a
	}
	return v
}

// notModified reports whether r's If-None-Match names tag, or is "*" when
// star is set: when the answer is known to be a current representation.
func notModified(r *http.Request, tag string, star bool) bool {
	inm := r.Header.Get("If-None-Match")
	if inm == "" || tag == "" {
		return false
	}
	for _, t := range strings.Split(inm, ",") {
		t = strings.TrimSpace(t)
		if (star && t == "*") || strings.TrimPrefix(t, "W/") == tag {
			return true
		}
	}
	return false
}

// writeRegistry sends v, a 200's answer, with its ETag (the feed's tag,
// else v's own), or 304 without a body when If-None-Match names it or is
// "*". Error answers carry no ETag and are never 304 (RFC 9110 section
// 13.2.1: a precondition is ignored when the answer would not be 2xx).
func (h *handler) writeRegistry(w http.ResponseWriter, r *http.Request, tag string, v any) {
	if tag == "" {
		tag = contentTag(v)
	}
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "private, no-cache")
	if notModified(r, tag, true) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.writeJSON(w, r, http.StatusOK, v)
}

// registryNotModified answers 304 when the feed's tag matches r's
// If-None-Match, before anything is read: it reports whether it did. The
// request must be known to be sound (its query and name parsed). Only the
// tag itself matches here: it was sent with a 200 of this very request at
// this version of the tenant, so the answer is that 200 again. "*" asks
// whether a current representation exists, which the store says: it is
// left to writeRegistry.
func registryNotModified(w http.ResponseWriter, r *http.Request, tag string) bool {
	if !notModified(r, tag, false) {
		return false
	}
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "private, no-cache")
	w.WriteHeader(http.StatusNotModified)
	return true
}
