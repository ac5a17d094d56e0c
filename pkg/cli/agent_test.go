package cli

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/agent"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// A stdio MCP server for these tests is this test binary started again;
// TestMain (helpers_test.go) belongs to the package's other tests, so the
// hook runs here, before it.
func init() { mcptest.ServeIfAsked() }

var cliTools = []mcptest.Tool{
	{Name: "create-event", Description: "Create an event"},
	{Name: "list-events", Description: "List the events of a day"},
	{Name: strings.Repeat("x", 130), Description: "a name too long for a skill"},
}

func TestRegisterFromMCP(t *testing.T) {
	isolate(t)
	b := setup(t)
	t.Setenv(EnvServer, b.url)
	t.Setenv(EnvToken, b.token)

	srv := mcptest.NewServer(mcptest.Config{Name: "calendar-server", Version: "1.4.0", Tools: cliTools})
	url := mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{})
	st := mcptest.NewStdio(t, mcptest.Config{Name: "files-server", Version: "0.3.0-beta.2", Tools: cliTools[:2]})

	for _, c := range []struct {
		module, flag, value, version string
		protocols                    []string
		skills                       []string
	}{
		{"calendar", "--from-mcp", url, "1.4.0", []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}, []string{"create-event", "list-events"}},
		{"files", "--from-mcp-command", st.CommandLine(), "0.3.0-beta.2", []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}, []string{"create-event", "list-events"}},
	} {
		code, out, errOut := mainRun(t, "register", "--module", c.module, c.flag, c.value, "-o", "json")
		var got registry.Server
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("register %s %s: exit %d stdout %q stderr %q", c.flag, c.value, code, out, errOut)
		}
		if got.ModuleName != c.module || got.Version != c.version || !slices.Equal(got.SupportedProtocols, c.protocols) {
			t.Fatalf("%s: registered %+v", c.flag, got)
		}
		var caps map[string]map[string]bool
		if json.Unmarshal(got.CapabilityAdvertisement, &caps) != nil || !caps["tools"]["listChanged"] {
			t.Fatalf("%s: capabilities %s", c.flag, got.CapabilityAdvertisement)
		}
		skills, err := b.client.Skills(context.Background(), got.ServerID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range skills {
			names = append(names, s.Name)
			if s.Name == "list-events" && s.Description != "List the events of a day" {
				t.Fatalf("description %q", s.Description)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, c.skills) {
			t.Fatalf("%s: skills %v, want %v", c.flag, names, c.skills)
		}
		if c.module == "calendar" && !strings.Contains(errOut, "Warning: skipped tool \"xxxx") {
			t.Fatalf("no warning about the long tool name on stderr: %q", errOut)
		}
	}

	// A version that is not semantic: exit 1, naming it; --version overrides.
	odd := mcptest.NewServer(mcptest.Config{Name: "odd-server", Version: "2.0", Tools: cliTools[:1]})
	oddURL := mcptest.ServeHTTP(t, odd, mcptest.HTTPOptions{})
	code, out, errOut := mainRun(t, "register", "--module", "odd", "--from-mcp", oddURL)
	if code != 1 || out != "" || !strings.Contains(errOut, `reports version "2.0"`) || !strings.Contains(errOut, "--version") {
		t.Fatalf("bad version: exit %d stdout %q stderr %q", code, out, errOut)
	}
	if all, err := b.client.AllServers(context.Background(), clientListOf("odd")); err != nil || len(all) != 0 {
		t.Fatalf("registered despite the bad version: %v %v", all, err)
	}
	code, out, errOut = mainRun(t, "register", "--module", "odd", "--from-mcp", oddURL, "--version", "2.0.0", "-o", "json")
	if code != 0 || !strings.Contains(out, `"version": "2.0.0"`) {
		t.Fatalf("--version override: exit %d stdout %q stderr %q", code, out, errOut)
	}

	// A server that cannot be reached: exit 1.
	code, _, errOut = mainRun(t, "register", "--module", "gone", "--from-mcp-command", "/nonexistent/server --stdio")
	if code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing command: exit %d stderr %q", code, errOut)
	}

	// The flag-based form is unchanged.
	code, out, _ = mainRun(t, "register", "--module", "plain", "--version", "1.0.0", "--protocol", "2025-06-18", "-o", "json")
	if code != 0 || !strings.Contains(out, `"module_name": "plain"`) {
		t.Fatalf("flag-based register: exit %d stdout %q", code, out)
	}
}

func clientListOf(module string) client.ListServersParams {
	return client.ListServersParams{ModuleName: module}
}

func TestRegisterAndAgentUsage(t *testing.T) {
	isolate(t)
	for _, args := range [][]string{
		{"register", "--module", "m", "--from-mcp", "http://127.0.0.1:1/mcp", "--protocol", "2025-06-18"},
		{"register", "--module", "m", "--from-mcp", "http://127.0.0.1:1/mcp", "--skill", "a"},
		{"register", "--module", "m", "--from-mcp-command", "srv", "--capabilities", "c.json"},
		{"register", "--module", "m", "--from-mcp", "http://127.0.0.1:1/mcp", "--from-mcp-command", "srv"},
		{"register", "--module", "m", "--from-mcp", "ftp://127.0.0.1/mcp"},
		{"register", "--module", "m", "--from-mcp-command", "srv 'unclosed"},
		{"register", "--module", "m", "--from-mcp-command", "   "},
		{"register", "--module", "m", "--version", "1.0.0"},
		{"agent", "--module", "m"},
		{"agent", "--mcp", "http://127.0.0.1:1/mcp"},
		{"agent", "--module", "m", "--mcp", "http://127.0.0.1:1/mcp", "--mcp-command", "srv"},
		{"agent", "--module", "m", "--mcp", "http://127.0.0.1:1/mcp", "--log-level", "loud"},
		{"agent", "--module", "m", "--mcp", "http://127.0.0.1:1/mcp", "--log-format", "xml"},
		{"agent", "--module", "m", "--mcp", "http://127.0.0.1:1/mcp", "--probe-timeout", "0s"},
		{"agent", "--module", "Bad_Name", "--mcp", "http://127.0.0.1:1/mcp"},
		{"agent", "--module", "m", "--mcp-command", `srv "x`},
	} {
		code, out, errOut := mainRun(t, args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "Error: ") || !strings.Contains(errOut, "--help' for usage.") {
			t.Errorf("%q: exit %d stdout %q stderr %q; want 2, a message and a hint", args, code, out, errOut)
		}
	}
	code, _, errOut := mainRun(t, "register", "--module", "m")
	if code != 2 || !strings.HasPrefix(errOut, `Error: required flag(s) "protocol", "version" not set`) {
		t.Errorf("register without a source: exit %d stderr %q", code, errOut)
	}
}

func TestAgentCommandParses(t *testing.T) {
	t.Parallel()
	var got *agentOptions
	cmd := newCmdAgent(testFactory(newTestIO(), map[string]string{EnvTraceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
		func(o *agentOptions) error { got = o; return nil })
	if err := execute(t, cmd, "--module", "everything", "--mcp-command", `node "/opt/my server/index.js" stdio`,
		"--probe-timeout", "500ms", "--log-format", "json", "--log-level", "debug", "--probe-revisions=false"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Target.Command, []string{"node", "/opt/my server/index.js", "stdio"}) || got.ProbeTimeout != 500*time.Millisecond ||
		got.LogFormat != "json" || got.Level.String() != "DEBUG" || got.ProbeRevisions || got.Traceparent == "" ||
		got.ConnectTimeout != agent.DefaultConnectTimeout {
		t.Fatalf("parsed %+v", got)
	}
}

// TestAgentCommandRuns runs mcpctl agent until its context ends: it
// registers the server, and deregisters it and exits 0 at the end.
func TestAgentCommandRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := mcptest.NewStdio(t, mcptest.Config{Name: "files-server", Version: "1.2.3", Tools: cliTools[:2]})
	ts := newTestIO()
	// The agent writes its log while the test reads it.
	errOut := &testlog.Buffer{}
	ts.io.ErrOut = errOut
	opts := &agentOptions{IO: ts.io, Client: b.clientFunc(), Module: "files", MCPCommand: st.CommandLine(),
		// The deregistration's bound is generous: with 1 s, a CI run under
		// load saw it time out (the agent logs that and exits 0).
		ProbeTimeout: time.Second, ConnectTimeout: 10 * time.Second, DeregisterTimeout: 10 * time.Second, LogFormat: "json", LogLevel: "info",
		tune: func(o *agent.Options) { o.TerminateGrace = 200 * time.Millisecond }}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- agentRun(ctx, opts) }()
	var srv registry.Server
	// Registered in the registry, and known so to the agent: stopped
	// between the two (a CI run under load), it leaves the server as it is.
	if !testwait.Wait(10*time.Second, func() bool {
		all, err := b.client.AllServers(context.Background(), clientListOf("files"))
		if err == nil && len(all) == 1 && all[0].Status == registry.StatusHealthy &&
			strings.Contains(errOut.String(), `"msg":"registered"`) {
			srv = all[0]
			return true
		}
		return false
	}) {
		cancel()
		<-errc
		t.Fatalf("not registered within 10s; stderr:\n%s", errOut)
	}
	if srv.Version != "1.2.3" || srv.SupportedProtocols[0] != "2026-07-28" {
		t.Fatalf("registered %+v", srv)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("agent returned %v, want nil (exit 0)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not stop within 20s")
	}
	got, err := b.client.Server(context.Background(), srv.ServerID)
	if err != nil || got.Status != registry.StatusDeregistered {
		t.Fatalf("after the agent stopped: %+v %v; stderr:\n%s", got, err, errOut)
	}
	// JSON logs on stderr, the stdio server's own stderr among them.
	logs := errOut.String()
	if !strings.Contains(logs, `"msg":"registered"`) || !strings.Contains(logs, `"msg":"deregistered"`) || !strings.Contains(logs, "mcptest: serving files-server") {
		t.Fatalf("stderr:\n%s", logs)
	}
}
