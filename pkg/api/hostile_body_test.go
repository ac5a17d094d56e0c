package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/registry"
)

// TestRegisterRefusesControlCharactersInLabels: a description or title with
// a control character, a line break or a bidirectional override is a 400
// naming the field (found against the real binary: each was a 201, and
// "\u202e" reversed the title on the board and in registry clients).
// Validation runs in the registrar, before either store.
func TestRegisterRefusesControlCharactersInLabels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := `{"module_name":"labels","version":"1.0.0","supported_protocols":["2025-06-18"]`
	for _, field := range []string{"description", "title"} {
		for _, s := range []string{`a\u0000b`, `a\u0001b`, `line\nline`, `a\tb`, `\u001b[2J`, `a\u001fb`, `a\u007fb`,
			`a\u0085b`, `a\u2028b`, `abc\u202edcb`, `a\u2066b\u2069`} {
			t.Run(field+" "+s, func(t *testing.T) {
				resp := b.post(t, registerPath, base+`,"`+field+`":"`+s+`"}`)
				p := wantProblem(t, resp, http.StatusBadRequest, field)
				if !strings.HasPrefix(p.Detail, field+": ") {
					t.Fatalf("detail %q does not name %s", p.Detail, field)
				}
			})
		}
	}
	resp := b.post(t, registerPath, base+`,"description":"Le calendrier de l’équipe 📅","title":"לוח שנה\u200f"}`)
	if resp.code != http.StatusCreated {
		t.Fatalf("printable text: %d %s", resp.code, resp.body)
	}
}

// nestedCapabilities is a capability advertisement nested depth levels
// deep: the object itself, then depth-1 arrays.
func nestedCapabilities(depth int) string {
	return `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

// TestRegisterCapabilityDepth: a capability advertisement nests objects and
// arrays at most registry.MaxCapabilityDepth levels deep; deeper is a 400
// naming capability_advertisement, however deep (a body of 256 KiB nests
// 100,000 levels: it is refused before anything walks it recursively).
// Before, 5,000 levels were stored, and 20,000 were a 400 that called valid
// JSON invalid.
func TestRegisterCapabilityDepth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := func(module string, depth int) string {
		return fmt.Sprintf(`{"module_name":%q,"version":"1.0.0","supported_protocols":["2025-06-18"],"capability_advertisement":%s}`,
			module, nestedCapabilities(depth))
	}
	if resp := b.post(t, registerPath, body("deep-ok", registry.MaxCapabilityDepth)); resp.code != http.StatusCreated {
		t.Fatalf("depth %d: %d %s", registry.MaxCapabilityDepth, resp.code, resp.body)
	}
	for _, depth := range []int{registry.MaxCapabilityDepth + 1, 64, 5000, 20000, 100000} {
		t.Run(fmt.Sprint("depth ", depth), func(t *testing.T) {
			resp := b.post(t, registerPath, body("deep", depth))
			p := wantProblem(t, resp, http.StatusBadRequest, "capability_advertisement")
			if !strings.Contains(p.Detail, fmt.Sprint(registry.MaxCapabilityDepth)) {
				t.Fatalf("detail %q does not give the limit", p.Detail)
			}
		})
	}
	// Objects count as arrays do.
	deepObjects := `{"module_name":"deep","version":"1.0.0","supported_protocols":["2025-06-18"],"capability_advertisement":` +
		strings.Repeat(`{"a":`, registry.MaxCapabilityDepth+1) + `1` + strings.Repeat(`}`, registry.MaxCapabilityDepth+1) + `}`
	wantProblem(t, b.post(t, registerPath, deepObjects), http.StatusBadRequest, "capability_advertisement")
	// A deep body elsewhere is a 400 too, never a walk of every level.
	for _, s := range []string{
		`{"server_id":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`,
		strings.Repeat("[", 100000) + strings.Repeat("]", 100000),
	} {
		if resp := b.post(t, "/v1/mcp/servers/heartbeat", s); resp.code != http.StatusBadRequest {
			t.Fatalf("deep heartbeat body: %d %s", resp.code, resp.body)
		}
	}
}
