package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/auth"
)

// The clients that read registries by URL (IDEs, CLIs, ToolHive, catalog
// importers) send no bearer token, and some read from a browser page of
// another origin. With a public tenant, /v0.1 answers them for it; CORS
// lets a page of any origin read /v0.1, and only /v0.1.

// RouteRegistryPreflight answers the CORS preflight of every /v0.1 path.
const RouteRegistryPreflight = "OPTIONS /v0.1/"

// CORS of /v0.1: any origin, no credentials (no
// Access-Control-Allow-Credentials), the methods of the read side, the two
// request headers a reader sends, and the ETag a follower keeps.
const (
	registryCORSMethods = "GET, HEAD, OPTIONS"
	registryCORSHeaders = "Authorization, If-None-Match"
	registryCORSExpose  = "ETag"
	// registryCORSMaxAge is how long a browser may keep a preflight, in
	// seconds.
	registryCORSMaxAge = "86400"
)

// isRegistryPath reports whether path is under /v0.1.
func isRegistryPath(path string) bool {
	return path == "/v0.1" || strings.HasPrefix(path, "/v0.1/")
}

// setRegistryCORS gives an answer of /v0.1 its CORS headers, errors
// included, so that a page reads a 401, 404 or 429 as such rather than as a
// network error.
func setRegistryCORS(hdr http.Header) {
	hdr.Set("Access-Control-Allow-Origin", "*")
	hdr.Set("Access-Control-Expose-Headers", registryCORSExpose)
}

// registryPreflight answers a CORS preflight of /v0.1: 204 with the
// methods and headers allowed (the origin is set by setRegistryCORS).
func registryPreflight(w http.ResponseWriter, _ *http.Request) {
	hdr := w.Header()
	hdr.Set("Access-Control-Allow-Methods", registryCORSMethods)
	hdr.Set("Access-Control-Allow-Headers", registryCORSHeaders)
	hdr.Set("Access-Control-Max-Age", registryCORSMaxAge)
	hdr.Set("Allow", registryCORSMethods)
	w.WriteHeader(http.StatusNoContent)
}

// anonymousBucketSpace names the rate-limit buckets of anonymous readers.
var anonymousBucketSpace = uuid.MustParse("7c0d6f1e-5a53-4b8e-9b0e-2f7f3c1d9a40")

// anonymousBucket is the rate-limit bucket of the public tenant's anonymous
// readers: the tenant's rate and burst, but a bucket of its own, so that
// clients without a token can never use up what the tenant's own calls
// (heartbeats above all) need.
func anonymousBucket(tenant uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(anonymousBucketSpace, tenant[:])
}

// registryRead authorizes a read of /v0.1. A request with an Authorization
// header is checked as on /v1 (401, 403, the token's tenant); one without
// reads the public tenant when there is one, with the read scope and that
// tenant's rate limit in a bucket of its own (anonymousBucket), and is 401
// when there is none.
func (h *handler) registryRead(next authedFunc) http.Handler {
	withToken := h.authorized(auth.ScopeRead, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.publicTenant == uuid.Nil || len(r.Header.Values("Authorization")) > 0 {
			withToken.ServeHTTP(w, r)
			return
		}
		if ok, wait := h.limits.Allow(anonymousBucket(h.publicTenant)); !ok {
			h.metrics.refused(RefusedRate)
			writeProblem(w, r, rateLimitedProblem(wait))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
		defer cancel()
		next(w, r.WithContext(ctx), auth.Claims{TenantID: h.publicTenant, Scopes: []string{auth.ScopeRead}})
	})
}
