package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/registry"
)

// TestRegisterCapabilitySizeAsStoredAndAnswered: an advertisement is at
// most registry.MaxCapabilityBytes as it is stored and answered by either
// store, whitespace aside. 1,000 numbers 1E131071 (9 KB sent) were stored as 131 MB; 20,000
// '<' are 20 KB stored and 120 KB answered (JSON writes each as \u003c).
func TestRegisterCapabilitySizeAsStoredAndAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := func(module, caps string) string {
		return `{"module_name":"` + module + `","version":"1.0.0","supported_protocols":["2025-06-18"],"capability_advertisement":` + caps + `}`
	}
	for _, c := range []struct{ name, caps string }{
		{"expanding", `{"n":[1E131071` + strings.Repeat(",1E131071", 999) + `]}`},
		{"one number", `{"n":1E65536}`},
		{"fractions", `{"n":[` + strings.Repeat("1E-16000,", 4) + `1E-16000]}`},
		{"escaped in the answer", `{"s":"` + strings.Repeat("<", 20000) + `"}`},
		{"long", `{"s":"` + strings.Repeat("x", registry.MaxCapabilityBytes) + `"}`},
		// Stored by the memory store as sent: 240 KB.
		{"escapes", `{"s":"` + strings.Repeat(`\u0041`, 40000) + `"}`},
	} {
		resp := b.post(t, registerPath, body("big", c.caps))
		if resp.code != http.StatusBadRequest {
			t.Errorf("%s: %d %.200s, want 400", c.name, resp.code, resp.body)
			continue
		}
		wantProblem(t, resp, http.StatusBadRequest, "capability_advertisement")
	}
	for _, c := range []struct{ name, caps string }{
		{"a number of 65,000 digits", `{"n":1E64999}`},
		{"64 KiB less the envelope", `{"s":"` + strings.Repeat("x", registry.MaxCapabilityBytes-9) + `"}`},
		{"whitespace aside", "{\n" + strings.Repeat(" ", 100_000) + `"s" :  "` + strings.Repeat("x", registry.MaxCapabilityBytes-9) + "\"\n\t}"},
	} {
		resp := b.post(t, registerPath, body("fits", c.caps))
		if resp.code != http.StatusCreated && resp.code != http.StatusOK {
			t.Errorf("%s: %d %.200s, want 201", c.name, resp.code, resp.body)
			continue
		}
		srv := decode[registry.Server](t, b.get(t, "/v1/mcp/servers/"+decode[registry.Server](t, resp).ServerID.String()))
		if n := len(srv.CapabilityAdvertisement); n > registry.MaxCapabilityBytes {
			t.Errorf("%s: answered as %d bytes", c.name, n)
		}
	}
}
