package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
)

// TestMCPSessionFlags: --mcp-max-sessions-per-subject reaches /mcp: one
// token subject opens that many 2025-11-25 sessions, the next initialize
// is 429 naming the subject's bound, and 2026-07-28 calls go on.
func TestMCPSessionFlags(t *testing.T) {
	var stdout testlog.Buffer
	cfg := devConfig()
	cfg.MCPMaxSessionsPerSubject = 1
	d := start(t, cfg, daemon.Options{Stdout: &stdout})
	m := tokenRE.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no token in the banner:\n%s", stdout.String())
	}
	hc := &http.Client{Transport: bearerTransport{token: m[1]}}
	defer hc.CloseIdleConnections()
	connect := func(rev string) (*mcp.ClientSession, error) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "daemon-test", Version: "1"}, nil)
		return cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + d.Addr() + "/mcp", HTTPClient: hc},
			&mcp.ClientSessionOptions{ProtocolVersion: rev})
	}
	first, err := connect("2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := connect("2025-11-25"); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("a second session of the subject: %v, want 429", err)
	}
	modern, err := connect("2026-07-28")
	if err != nil {
		t.Fatalf("2026-07-28 beside it: %v", err)
	}
	defer modern.Close()
}
