package api_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestRegistryUpdatedSinceStrictRFC3339: updated_since is an RFC 3339
// date-time, as RFC 3339's grammar has it (time.Parse takes more: an offset
// hour of 24, a minute of 60, a one-digit hour, a comma before the
// fraction). Each of those was a 200.
func TestRegistryUpdatedSinceStrictRFC3339(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "calendar")
	for _, s := range []string{
		"2026-05-17T10:00:00+24:00", "2026-05-17T10:00:00-24:00", "2026-05-17T10:00:00+23:60",
		"2026-05-17T1:00:00Z", "2026-05-17T10:00:00,5Z", "2026-05-17T10:00:00.Z",
		"2026-05-17T10:00:00+0200", "2026-05-17T10:00:00+02", "2026-05-17 10:00:00Z", "2026-05-17T10:00Z",
		"2026-02-30T10:00:00Z", "2026-05-17T24:00:00Z", "+2026-05-17T10:00:00Z", "2026-05-17T10:00:00Z ",
		"2026-05-17t10:00:00+24:00", "2026-05-17t10:00:00z ", "2026-05-17x10:00:00z", "2026-05-17T10:00:00Y",
		"2026-05-17T10:00:00+99:00",
	} {
		resp := b.get(t, "/v0.1/servers?updated_since="+url.QueryEscape(s))
		if resp.code != http.StatusBadRequest {
			t.Errorf("updated_since=%s: %d %s, want 400", s, resp.code, resp.body)
			continue
		}
		if e := strictDecode[oaError](t, resp); e.Error == "" {
			t.Errorf("updated_since=%s: empty error", s)
		}
	}
	for _, s := range []string{
		"2026-05-17T10:00:00Z", "2026-05-17T10:00:00.123456789Z", "2026-05-17T10:00:00+23:59",
		"2026-05-17T10:00:00-00:00", "2026-05-17T12:00:00+02:00", "2026-05-17T10:00:00.5-09:30",
		// RFC 3339 section 5.6: "T" and "Z" may be lower case; was a 400.
		"2026-05-17t10:00:00z", "2026-05-17t10:00:00Z", "2026-05-17T10:00:00.5z", "2026-05-17t12:00:00+02:00",
	} {
		if resp := b.get(t, "/v0.1/servers?updated_since="+url.QueryEscape(s)); resp.code != http.StatusOK {
			t.Errorf("updated_since=%s: %d %s, want 200", s, resp.code, resp.body)
		}
	}
}

// TestRegistryErrorsAreNotConditional: a /v0.1 answer that is an error
// (400, 404) carries the ETag of its own body (API.md: an ETag on every
// answer), and a conditional request whose answer would be an error gets
// the error, even when it sends that very tag (RFC 9110 section 13.2.1: preconditions are
// ignored when the answer would not be 2xx or 412). "If-None-Match: *" means
// "any current representation", and an unknown server has none: it was a
// 304, before the store was read, for any name or version.
func TestRegistryErrorsAreNotConditional(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{feed: true})
	srv := b.register(t, "calendar")
	b.register(t, "mail")
	const one = "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest"
	tag := b.settledTag(t, one)
	mailTag := b.settledTag(t, "/v0.1/servers/local.mcpd%2Fmail/versions/latest")
	for _, c := range []struct {
		path, inm string
		code      int
	}{
		{"/v0.1/servers/local.mcpd%2Fnosuch/versions", "*", http.StatusNotFound},
		{"/v0.1/servers/local.mcpd%2Fnosuch/versions/latest", "*", http.StatusNotFound},
		{"/v0.1/servers/local.mcpd%2Fcalendar/versions/9.9.9", "*", http.StatusNotFound},
		{"/v0.1/servers/other.ns%2Fcalendar/versions/latest", "*", http.StatusNotFound},
		{"/v0.1/servers/local.mcpd%2FBad_Name/versions", "*", http.StatusNotFound},
		{"/v0.1/servers/local.mcpd%2Fcalendar/versions?include_deleted=maybe", "*", http.StatusBadRequest},
		{one + "?include_deleted=maybe", "*", http.StatusBadRequest},
		{"/v0.1/servers?limit=0", "*", http.StatusBadRequest},
		{"/v0.1/servers/local.mcpd%2Fnosuch/versions/latest", tag + ", " + mailTag, http.StatusNotFound},
	} {
		resp := b.do(t, req{path: c.path, header: map[string]string{"If-None-Match": c.inm}})
		if resp.code != c.code {
			t.Errorf("%s with If-None-Match %s: %d %q, want %d", c.path, c.inm, resp.code, resp.body, c.code)
			continue
		}
		errTag := resp.header.Get("ETag")
		if errTag == "" || errTag == tag || errTag == mailTag {
			t.Errorf("%s: a %d with ETag %q, want its own", c.path, resp.code, errTag)
		}
		if again := b.do(t, req{path: c.path, header: map[string]string{"If-None-Match": errTag}}); again.code != c.code {
			t.Errorf("%s with the error's own tag: %d, want %d", c.path, again.code, c.code)
		}
		if e := strictDecode[oaError](t, resp); e.Error == "" {
			t.Errorf("%s: empty error", c.path)
		}
	}
	// A server that exists: "*" and its own tag are 304.
	for _, inm := range []string{"*", tag} {
		if resp := b.poll(t, one, inm); resp.code != http.StatusNotModified {
			t.Fatalf("%s with If-None-Match %s: %d, want 304", one, inm, resp.code)
		}
	}
	// Deregistered, it is gone from the default answer: the tag of its
	// last 200 gets the 404, not a 304.
	if resp := b.post(t, "/v1/mcp/servers/deregister", `{"server_id":"`+srv.ServerID.String()+`"}`); resp.code != http.StatusOK {
		t.Fatalf("deregister: %d %s", resp.code, resp.body)
	}
	if resp := b.do(t, req{path: one, header: map[string]string{"If-None-Match": tag}}); resp.code != http.StatusNotFound ||
		resp.header.Get("ETag") == tag {
		t.Fatalf("deregistered, with the old tag: %d, ETag %q, want 404 with a tag of its own", resp.code, resp.header.Get("ETag"))
	}
}
