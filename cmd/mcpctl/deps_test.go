package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryDependencies holds the two production binaries to their
// surface: neither links test support or the benchmark harness, and mcpctl,
// which module teams run beside their servers, links none of the server's
// packages nor its metrics. Each links one PostgreSQL driver: mcpd's store
// speaks pgx, and `mcpctl migrate` (pkg/schema) speaks lib/pq through
// golang-migrate's postgres driver, so mcpctl links no pgx and mcpd neither
// lib/pq nor golang-migrate. Nor does mcpctl link the OpenTelemetry SDK: the
// agent writes its probes' traceparent itself.
func TestBinaryDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go tool not on PATH:", err)
	}
	const module = "github.com/cyberos/mcpd/"
	neverInABinary := []string{
		module + "pkg/testing/",
		module + "cmd/mcpd-bench/",
		"go.uber.org/goleak",
		"github.com/stacklok/", // ToolHive: internal/consumers/toolhive's test only
		"testing\n",
	}
	cases := []struct {
		binary string
		banned []string
	}{
		{"../mcpd", append([]string{
			"github.com/lib/pq",
			"github.com/golang-migrate/",
			module + "pkg/schema\n",
		}, neverInABinary...)},
		{".", append([]string{
			"github.com/prometheus/",
			"github.com/jackc/pgx",
			"pgconn",
			module + "pkg/api\n",
			module + "pkg/pgstore\n",
			module + "pkg/memstore\n",
			module + "pkg/daemon\n",
			module + "pkg/feed\n",
			module + "pkg/limit\n",
			module + "pkg/alert\n",
			module + "pkg/tracing\n",
			"go.opentelemetry.io/otel/sdk",
		}, neverInABinary...)},
	}
	for _, c := range cases {
		out, err := exec.Command(goBin, "list", "-deps", c.binary).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", c.binary, err, out)
		}
		deps := string(out) + "\n"
		for _, b := range c.banned {
			if strings.Contains(deps, b) {
				t.Errorf("%s links %s", c.binary, strings.TrimSpace(b))
			}
		}
	}
}
