package cli

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/agent"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestMCPHeaders(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "headers", "# for the calendar server\nX-Tenant: acme\n\n  authorization:  Bearer s3cret  \n")
	h, err := mcpHeaders([]string{"X-Trace: on", "X-Tenant: other"}, file)
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"X-Trace": {"on"}, "X-Tenant": {"other", "acme"}, "Authorization": {"Bearer s3cret"}}
	if len(h) != len(want) || h.Get("Authorization") != "Bearer s3cret" || strings.Join(h.Values("X-Tenant"), ",") != "other,acme" {
		t.Fatalf("headers %v, want %v", h, want)
	}
	for _, c := range []struct {
		flags []string
		file  string
		want  string
	}{
		{[]string{"no colon"}, "", "want 'Name: value'"},
		{[]string{"Bad Name: x"}, "", "want 'Name: value'"},
		{[]string{": x"}, "", "want 'Name: value'"},
		{nil, writeFile(t, "bad", "X-Ok: 1\nAuthorization Bearer s3cret\n"), "line 2 is not 'Name: value'"},
		{nil, filepath.Join(t.TempDir(), "missing"), "--mcp-header-file"},
	} {
		_, err := mcpHeaders(c.flags, c.file)
		if !isUsage(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q %s: %v, want a usage error saying %q (and no secret)", c.flags, c.file, err, c.want)
		}
	}

	code, _, errOut := mainRun(t, "agent", "--module", "m", "--mcp-command", "srv", "--mcp-header", "X-A: 1")
	if code != 2 || !strings.Contains(errOut, "for an HTTP server") {
		t.Fatalf("headers with a stdio server: exit %d stderr %q", code, errOut)
	}
}

// TestAgentTokenFile: the agent's client sends the token of --token-file.
func TestAgentTokenFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := mcptest.NewStdio(t, mcptest.Config{Name: "files-server", Version: "1.2.3", Tools: cliTools[:2]})
	ts := newTestIO()
	noToken := client.New(b.url, "")
	t.Cleanup(noToken.CloseIdleConnections)
	opts := &agentOptions{IO: ts.io, Client: func() (*client.Client, error) { return noToken, nil }, Module: "files",
		MCPCommand: st.CommandLine(), TokenFile: writeFile(t, "token", b.token+"\n"),
		ProbeTimeout: time.Second, ConnectTimeout: 10 * time.Second, DeregisterTimeout: time.Second, LogFormat: "json", LogLevel: "info",
		tune: func(o *agent.Options) { o.TerminateGrace = 200 * time.Millisecond }}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- agentRun(ctx, opts) }()
	if !testwait.Wait(10*time.Second, func() bool {
		all, err := b.client.AllServers(context.Background(), clientListOf("files"))
		return err == nil && len(all) == 1 && all[0].Status == registry.StatusHealthy
	}) {
		cancel()
		<-errc
		t.Fatalf("not registered within 10s with the token file; stderr:\n%s", ts.errOut)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("agent returned %v", err)
	}

	// A token file that cannot be read stops the agent at start: exit 1.
	opts.TokenFile = filepath.Join(t.TempDir(), "missing")
	if err := agentRun(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "token file") {
		t.Fatalf("missing token file: %v", err)
	}
}
