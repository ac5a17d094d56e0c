package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoServerDependencies holds the client to the small wire package: a
// program that talks to mcpd must not link the server's store driver,
// metrics or token signing.
func TestNoServerDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH:", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	banned := []string{
		"github.com/jackc/pgx",
		"github.com/prometheus/",
		"github.com/golang-jwt/",
		"github.com/go-jose/",
		"github.com/cyberos/mcpd/pkg/api\n", // the server's handler; pkg/apiwire is the client's
		"github.com/cyberos/mcpd/pkg/auth\n",
	}
	deps := string(out) + "\n"
	for _, b := range banned {
		if strings.Contains(deps, b) {
			t.Errorf("pkg/client depends on %s; import the wire types from pkg/apiwire", strings.TrimSpace(b))
		}
	}
}
