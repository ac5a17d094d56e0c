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
	} {
		if resp := b.get(t, "/v0.1/servers?updated_since="+url.QueryEscape(s)); resp.code != http.StatusOK {
			t.Errorf("updated_since=%s: %d %s, want 200", s, resp.code, resp.body)
		}
	}
}
