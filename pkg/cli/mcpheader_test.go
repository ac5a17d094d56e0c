package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
)

// TestRegisterFromMCPWithHeaders: register --from-mcp sends --mcp-header
// and --mcp-header-file to the MCP server, as the agent does, so a server
// that requires authorization can be registered by hand; without them its
// 401 comes with the hint to check --mcp-header. Before, register had no
// such flags (unknown flag: --mcp-header).
func TestRegisterFromMCPWithHeaders(t *testing.T) {
	isolate(t)
	b := setup(t)
	t.Setenv(EnvServer, b.url)
	t.Setenv(EnvToken, b.token)
	srv := mcptest.NewServer(mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: cliTools[:2]})
	url := mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer mcp-secret" || r.Header.Get("X-Tenant") != "acme" {
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}})

	code, out, errOut := mainRun(t, "register", "--module", "calendar", "--from-mcp", url)
	if code != 1 || out != "" || !strings.Contains(errOut, "check --mcp-header") {
		t.Fatalf("without the header: exit %d stdout %q stderr %q, want 1 and the hint", code, out, errOut)
	}
	code, out, errOut = mainRun(t, "register", "--module", "calendar", "--from-mcp", url,
		"--mcp-header", "Authorization: Bearer mcp-secret", "--mcp-header", "X-Tenant: acme", "-o", "json")
	if code != 0 || !strings.Contains(out, `"module_name": "calendar"`) {
		t.Fatalf("with --mcp-header: exit %d stdout %q stderr %q", code, out, errOut)
	}
	file := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(file, []byte("# the MCP server's credentials\nAuthorization: Bearer mcp-secret\nX-Tenant: acme\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = mainRun(t, "register", "--module", "calendar", "--from-mcp", url, "--mcp-header-file", file, "-o", "json")
	if code != 0 || !strings.Contains(out, `"module_name": "calendar"`) {
		t.Fatalf("with --mcp-header-file: exit %d stdout %q stderr %q", code, out, errOut)
	}
	// Bad usage: a header that is not 'Name: value', or for a stdio server.
	for _, args := range [][]string{
		{"register", "--module", "m", "--from-mcp", url, "--mcp-header", "no colon"},
		{"register", "--module", "m", "--from-mcp-command", "srv", "--mcp-header", "A: b"},
		{"register", "--module", "m", "--version", "1.0.0", "--protocol", "2025-06-18", "--mcp-header", "A: b"},
	} {
		if code, _, errOut := mainRun(t, args...); code != 2 {
			t.Fatalf("%v: exit %d stderr %q, want 2", args, code, errOut)
		}
	}
}
