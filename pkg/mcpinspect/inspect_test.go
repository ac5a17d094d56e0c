package mcpinspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// testTools are five tools, in the order the SDK lists them (by name);
// with a page size of 2, tools/list takes three pages.
var testTools = []mcptest.Tool{
	{Name: "create-event", Description: "Create an event"},
	{Name: "delete-event"},
	{Name: "find-slot", Description: "Find a free slot"},
	{Name: "list-events", Description: "List the events of a day"},
	{Name: "share", Description: "Share a calendar"},
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func toolNames(tools []Tool) []string {
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return names
}

func mcptestNames(tools []mcptest.Tool) []string {
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return names
}

func capsObject(t *testing.T, raw json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		t.Fatalf("capabilities %s: not a JSON object (%v)", raw, err)
	}
	return m
}

func TestInspectHTTP(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewServer(mcptest.Config{Name: "calendar-server", Version: "1.3.2", PageSize: 2, Tools: testTools})
	url := mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{})
	r, err := Inspect(ctxT(t, 10*time.Second), Target{URL: url}, InspectOptions{ProbeRevisions: true})
	if err != nil {
		t.Fatal(err)
	}
	// The stateful streamable HTTP transport cannot serve 2026-07-28: the
	// SDK falls back to initialize; server/discover listed the rest.
	if r.Name != "calendar-server" || r.Version != "1.3.2" || r.Protocol != "2025-11-25" {
		t.Fatalf("report %+v", r)
	}
	if want := []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}; !slices.Equal(r.Protocols, want) || r.ProtocolsFrom != RevisionsDiscover {
		t.Fatalf("protocols %v from %s, want %v from server/discover", r.Protocols, r.ProtocolsFrom, want)
	}
	if got, want := toolNames(r.Tools), mcptestNames(testTools); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v (all three pages)", got, want)
	}
	caps := capsObject(t, r.Capabilities)
	if string(caps["tools"]) != `{"listChanged":true}` {
		t.Fatalf("capabilities %s: want tools.listChanged", r.Capabilities)
	}

	reg, err := r.Registration("calendar", "")
	if err != nil {
		t.Fatal(err)
	}
	req := reg.Request
	if req.ModuleName != "calendar" || req.Version != "1.3.2" || !slices.Equal(req.SupportedProtocols, r.Protocols) ||
		string(req.CapabilityAdvertisement) != string(r.Capabilities) || len(req.Skills) != 5 || len(reg.Warnings) != 0 {
		t.Fatalf("registration %+v warnings %q", req, reg.Warnings)
	}
	if req.Skills[3] != (registry.SkillInfo{Name: "list-events", Description: "List the events of a day"}) || req.Skills[1].Description != "" {
		t.Fatalf("skills %+v", req.Skills)
	}
}

func TestInspectNarrowedRevisions(t *testing.T) {
	t.Parallel()
	for _, noDiscover := range []bool{false, true} {
		t.Run(fmt.Sprintf("no_discover=%v", noDiscover), func(t *testing.T) {
			t.Parallel()
			srv := mcptest.NewServer(mcptest.Config{Name: "old", Version: "0.9.0", NoDiscover: noDiscover,
				Protocols: []string{"2025-06-18", "2025-03-26"}, Tools: testTools[:1]})
			url := mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{})
			ctx := ctxT(t, 10*time.Second)
			r, err := Inspect(ctx, Target{URL: url}, InspectOptions{ProbeRevisions: true})
			if err != nil {
				t.Fatal(err)
			}
			wantFrom := RevisionsDiscover
			if noDiscover {
				wantFrom = RevisionsInitialize
			}
			if r.Protocol != "2025-06-18" || !slices.Equal(r.Protocols, []string{"2025-06-18", "2025-03-26"}) || r.ProtocolsFrom != wantFrom {
				t.Fatalf("protocol %s, protocols %v from %s; want 2025-06-18, [2025-06-18 2025-03-26] from %s", r.Protocol, r.Protocols, r.ProtocolsFrom, wantFrom)
			}
			if noDiscover {
				// Without probing, only the negotiated revision is known.
				r, err := Inspect(ctx, Target{URL: url}, InspectOptions{})
				if err != nil || !slices.Equal(r.Protocols, []string{"2025-06-18"}) || r.ProtocolsFrom != RevisionsNegotiated {
					t.Fatalf("no probing: %v from %s (%v)", r.Protocols, r.ProtocolsFrom, err)
				}
			}
		})
	}
}

func TestInspectStdio(t *testing.T) {
	t.Parallel()
	st := mcptest.NewStdio(t, mcptest.Config{Name: "files", Version: "2.0.0-rc.1+build.5", PageSize: 2, Tools: testTools})
	r, err := Inspect(ctxT(t, 10*time.Second), Target{Command: st.Command}, InspectOptions{ProbeRevisions: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "files" || r.Version != "2.0.0-rc.1+build.5" || r.Protocol != "2026-07-28" {
		t.Fatalf("report %+v", r)
	}
	if !slices.Equal(r.Protocols, KnownRevisions()) || r.ProtocolsFrom != RevisionsDiscover {
		t.Fatalf("protocols %v from %s, want all of %v from server/discover", r.Protocols, r.ProtocolsFrom, KnownRevisions())
	}
	if got := toolNames(r.Tools); !slices.Equal(got, mcptestNames(testTools)) {
		t.Fatalf("tools %v", got)
	}
	if caps := capsObject(t, r.Capabilities); caps["tools"] == nil {
		t.Fatalf("capabilities %s", r.Capabilities)
	}
	// server/discover answered: no extra process was started to probe.
	if n := st.Starts(); n != 1 {
		t.Fatalf("the server was started %d times, want once", n)
	}
}

func TestSessionLivenessAndToolsChanged(t *testing.T) {
	t.Parallel()
	type fixture struct {
		target   Target
		setPing  func(mcptest.PingMode)
		setTools func(...mcptest.Tool)
		protocol string
	}
	fixtures := map[string]func(t *testing.T) fixture{
		"http": func(t *testing.T) fixture {
			srv := mcptest.NewServer(mcptest.Config{Name: "h", Version: "1.0.0", Tools: testTools[:2]})
			return fixture{Target{URL: mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{})}, srv.SetPing, srv.SetTools, "2025-11-25"}
		},
		"http-stateless": func(t *testing.T) fixture {
			srv := mcptest.NewServer(mcptest.Config{Name: "h", Version: "1.0.0", Tools: testTools[:2]})
			return fixture{Target{URL: mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{Stateless: true})}, srv.SetPing, srv.SetTools, "2026-07-28"}
		},
		"stdio": func(t *testing.T) fixture {
			st := mcptest.NewStdio(t, mcptest.Config{Name: "s", Version: "1.0.0", Tools: testTools[:2]})
			return fixture{Target{Command: st.Command},
				func(m mcptest.PingMode) { st.SetPing(t, m) },
				func(tools ...mcptest.Tool) { st.SetTools(t, tools...) }, "2026-07-28"}
		},
	}
	for name, mk := range fixtures {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := mk(t)
			changed := make(chan struct{}, 8)
			ctx := ctxT(t, 15*time.Second)
			s, err := Connect(ctx, f.target, Options{OnToolsChanged: func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Info().Protocol != f.protocol {
				t.Fatalf("negotiated %s, want %s", s.Info().Protocol, f.protocol)
			}
			ping := func() error {
				pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				return s.Ping(pctx)
			}
			if err := ping(); err != nil {
				t.Fatalf("ping: %v", err)
			}
			// Control of a stdio server goes through a file it polls.
			eventually := func(what string, cond func() bool) {
				t.Helper()
				testwait.Until(t, what, 5*time.Second, cond)
			}
			f.setPing(mcptest.PingFail)
			eventually("ping fails", func() bool { return ping() != nil })
			f.setPing(mcptest.PingHang)
			eventually("ping hangs", func() bool {
				start := time.Now()
				err := ping()
				return errors.Is(err, context.DeadlineExceeded) && time.Since(start) < 2*time.Second
			})
			f.setPing(mcptest.PingOK)
			eventually("ping answers again", func() bool { return ping() == nil })

			f.setTools(testTools[1:4]...)
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Fatal("no notifications/tools/list_changed within 5s")
			}
			eventually("tools/list shows the change", func() bool {
				tools, err := s.Tools(ctx)
				return err == nil && slices.Equal(toolNames(tools), mcptestNames(testTools[1:4]))
			})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.Done():
			default:
				t.Fatal("Done is not closed after Close")
			}
		})
	}
}

func TestSessionDoneWhenProcessDies(t *testing.T) {
	t.Parallel()
	st := mcptest.NewStdio(t, mcptest.Config{Name: "s", Version: "1.0.0", Tools: testTools[:1]})
	s, err := Connect(ctxT(t, 10*time.Second), Target{Command: st.Command}, Options{TerminateGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st.Kill(t)
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed within 5s of the process's death")
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Err() = %v, want how the process ended", err)
	}
	if err := s.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Ping after death = %v", err)
	}
}

func TestConnectFailures(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 10*time.Second)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	for _, c := range []struct {
		name   string
		target Target
		want   string
	}{
		{"no such command", Target{Command: []string{"/nonexistent/mcp-server"}}, "no such file"},
		{"exits at once", Target{Command: []string{"sh", "-c", "echo boom: bad config >&2; exit 3"}}, "boom: bad config"},
		{"not MCP", Target{Command: []string{"sh", "-c", "read line; echo not json; sleep 5"}}, "connect"},
		{"closed port", Target{URL: closedURL}, "connect"},
		{"no target", Target{}, ErrNoTarget.Error()},
	} {
		_, err := Connect(ctx, c.target, Options{TerminateGrace: 100 * time.Millisecond})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Connect = %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func TestRegistration(t *testing.T) {
	t.Parallel()
	r := Report{Name: "x", Version: "2024.1", Protocol: "2025-06-18", Protocols: []string{"2025-06-18"}, Capabilities: json.RawMessage(`{}`)}
	_, err := r.Registration("mod", "")
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Version != "2024.1" || !strings.Contains(err.Error(), `"2024.1"`) || !strings.Contains(err.Error(), "--version") {
		t.Fatalf("bad version: %v", err)
	}
	reg, err := r.Registration("mod", "2024.1.0")
	if err != nil || reg.Request.Version != "2024.1.0" {
		t.Fatalf("override: %+v %v", reg.Request, err)
	}

	long := strings.Repeat("n", 129)
	r.Version = "1.0.0"
	r.Tools = []Tool{{Name: long}, {Name: ""}, {Name: "a", Title: "Title of a"}, {Name: "a"}, {Name: "b", Description: strings.Repeat("d", 600)},
		{Name: "evil\x1b[31mRED"}, {Name: "c", Description: "Line one.\n\n  Args:\tq\u202e"}}
	for i := range 300 {
		r.Tools = append(r.Tools, Tool{Name: fmt.Sprintf("t%03d", i)})
	}
	reg, err = r.Registration("mod", "")
	if err != nil {
		t.Fatal(err)
	}
	skills := reg.Request.Skills
	if len(skills) != registry.MaxSkills || skills[0] != (registry.SkillInfo{Name: "a", Description: "Title of a"}) || skills[1].Name != "b" ||
		skills[2] != (registry.SkillInfo{Name: "c", Description: "Line one. Args: q"}) {
		t.Fatalf("%d skills, first %+v", len(skills), skills[:3])
	}
	if n := len([]rune(skills[1].Description)); n != MaxDescriptionLen || !strings.HasSuffix(skills[1].Description, "…") {
		t.Fatalf("description of %d characters", n)
	}
	w := strings.Join(reg.Warnings, "\n")
	for _, want := range []string{"its name is 129 characters", "without a name", `"a": listed twice`, "shortened the description",
		`"evil\x1b[31mRED": skill names are one line`, "skipped 47 tools past the first 256"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q lack %q", reg.Warnings, want)
		}
	}
	if err := (registry.ServerInfo{ModuleName: reg.Request.ModuleName, Version: reg.Request.Version,
		SupportedProtocols: reg.Request.SupportedProtocols, Skills: reg.Request.Skills}).Validate(); err != nil {
		t.Fatalf("the registration breaks the contract's rules: %v", err)
	}
}

func TestCaptureSSE(t *testing.T) {
	t.Parallel()
	c := &capture{}
	body := "event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"tasks\":{\"list\":{}}, \"tools\":{}},\"serverInfo\":{\"name\":\"x\",\"version\":\"1\"}}}\r\n\r\n"
	b := &captureBody{rc: nopCloser{strings.NewReader(body)}, cap: c, sse: true}
	buf := make([]byte, 7) // small reads: events cross them
	for {
		if _, err := b.Read(buf); err != nil {
			break
		}
	}
	if got := string(c.capabilities(false)); got != `{"tasks":{"list":{}},"tools":{}}` {
		t.Fatalf("captured %q", got)
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

func TestInspectServerEverything(t *testing.T) {
	t.Parallel()
	cmd := mcptest.ServerEverything(t)
	r, err := Inspect(ctxT(t, 60*time.Second), Target{Command: cmd}, InspectOptions{ProbeRevisions: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server-everything: %s %s, protocol %s, protocols %v from %s, %d tools, capabilities %s",
		r.Name, r.Version, r.Protocol, r.Protocols, r.ProtocolsFrom, len(r.Tools), r.Capabilities)
	if r.Name != "mcp-servers/everything" || !registry.ValidVersion(r.Version) {
		t.Fatalf("serverInfo %q %q", r.Name, r.Version)
	}
	if r.Protocol != "2025-11-25" || r.ProtocolsFrom != RevisionsInitialize ||
		!slices.Equal(r.Protocols, []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
		t.Fatalf("protocol %s, protocols %v from %s", r.Protocol, r.Protocols, r.ProtocolsFrom)
	}
	if !slices.Contains(toolNames(r.Tools), "echo") {
		t.Fatalf("tools %v lack echo", toolNames(r.Tools))
	}
	// Members the SDK does not model are kept as the server sent them.
	if caps := capsObject(t, r.Capabilities); caps["tools"] == nil || caps["tasks"] == nil {
		t.Fatalf("capabilities %s, want tools and tasks", r.Capabilities)
	}
	reg, err := r.Registration("everything", "")
	if err != nil || len(reg.Request.Skills) != len(r.Tools) || len(reg.Warnings) != 0 {
		t.Fatalf("registration %d skills of %d tools, warnings %q, %v", len(reg.Request.Skills), len(r.Tools), reg.Warnings, err)
	}
}
