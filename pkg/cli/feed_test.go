package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestSkillsListRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.register(t, "calendar", registry.SkillInfo{Name: "create-event"}, registry.SkillInfo{Name: "list-events", Description: "List events"})
	mail := b.register(t, "mail", registry.SkillInfo{Name: "send-mail"}, registry.SkillInfo{Name: "list-events"})
	if _, _, err := b.client.Register(ctx, api.RegisterRequest{
		ModuleName: "legacy", Version: "0.1.0", SupportedProtocols: []string{"2025-03-26"},
		Skills: []registry.SkillInfo{{Name: "list-events"}},
	}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Deregister(ctx, mail.ServerID); err != nil {
		t.Fatal(err)
	}

	run := func(f output.Format, tty bool, mod func(*skillsListOptions)) *testStreams {
		t.Helper()
		ts := newTestIO()
		ts.outTTY = tty
		opts := &skillsListOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, f)}
		if mod != nil {
			mod(opts)
		}
		if err := skillsListRun(ctx, opts); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	yes, no := true, false

	ts := run(output.Table, true, nil)
	want := "" +
		"NAME           MODULE     VERSION   AVAILABLE   REASON                SERVER STATUS\n" +
		"create-event   calendar   1.3.2     yes         -                     healthy\n" +
		"list-events    calendar   1.3.2     yes         -                     healthy\n" +
		"list-events    legacy     0.1.0     yes         -                     healthy\n" +
		"list-events    mail       1.3.2     no          server_deregistered   deregistered\n" +
		"send-mail      mail       1.3.2     no          server_deregistered   deregistered\n"
	if ts.out.String() != want {
		t.Fatalf("terminal skills list:\n%s\nwant\n%s", ts.out, want)
	}

	for _, tc := range []struct {
		name string
		mod  func(*skillsListOptions)
		want string // module/name per line
	}{
		{"--name list-events", func(o *skillsListOptions) { o.Name = "list-events" }, "calendar/list-events legacy/list-events mail/list-events"},
		{"--available", func(o *skillsListOptions) { o.Available = &yes }, "calendar/create-event calendar/list-events legacy/list-events"},
		{"--available=false", func(o *skillsListOptions) { o.Available = &no }, "mail/list-events mail/send-mail"},
		{"--module mail", func(o *skillsListOptions) { o.Module = "mail" }, "mail/list-events mail/send-mail"},
		{"--protocol 2025-03-26", func(o *skillsListOptions) { o.Protocol = "2025-03-26" }, "legacy/list-events"},
		{"--server-status deregistered", func(o *skillsListOptions) { o.ServerStatus = registry.StatusDeregistered }, "mail/list-events mail/send-mail"},
		{"--limit 2", func(o *skillsListOptions) { o.Limit = 2 }, "calendar/create-event calendar/list-events"},
	} {
		ts := run(output.Table, false, tc.mod)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(ts.out.String()), "\n") {
			f := strings.Split(l, "\t")
			got = append(got, f[1]+"/"+f[0])
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: %v, want %s\n%s", tc.name, got, tc.want, ts.out)
		}
	}

	// json and yaml: the API's skill objects, as an array.
	for _, f := range []output.Format{output.JSON, output.YAML} {
		ts := run(f, false, func(o *skillsListOptions) { o.Name = "send-mail" })
		var got []map[string]any
		if err := decodeAs(f, ts.out.Bytes(), &got); err != nil || len(got) != 1 {
			t.Fatalf("%s: %s (%v)", f, ts.out, err)
		}
		for _, k := range []string{"skill_id", "server_id", "name", "description", "available", "unavailable_reason",
			"module_name", "server_status", "version", "supported_protocols"} {
			if _, ok := got[0][k]; !ok {
				t.Errorf("%s: no %q in %v", f, k, got[0])
			}
		}
	}
	ts = run(output.Table, false, func(o *skillsListOptions) { o.Name = "nothing" })
	if ts.out.Len() != 0 || ts.errOut.String() != "No skills found\n" {
		t.Fatalf("empty: stdout %q stderr %q", ts.out, ts.errOut)
	}
	ts = run(output.JSON, false, func(o *skillsListOptions) { o.Name = "nothing" })
	if ts.out.String() != "[]\n" {
		t.Fatalf("empty json: %q", ts.out)
	}
}

// watching is an audit watch running in the background.
type watching struct {
	out, errOut *testlog.Buffer
	cancel      context.CancelFunc
	done        chan error
}

func startAuditWatch(t *testing.T, b *bundle, f output.Format, tty bool, mod func(*auditWatchOptions)) *watching {
	t.Helper()
	w := &watching{out: &testlog.Buffer{}, errOut: &testlog.Buffer{}, done: make(chan error, 1)}
	streams := &IOStreams{In: strings.NewReader(""), Out: w.out, ErrOut: w.errOut}
	p := &output.Printer{Out: w.out, ErrOut: w.errOut, Format: f, Terminal: tty, Now: b.clock.Now}
	opts := &auditWatchOptions{IO: streams, Client: b.clientFunc(), Printer: p}
	if mod != nil {
		mod(opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- auditWatchRun(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// waitFor waits until the output has n lines, for at most 10 s.
func (w *watching) waitFor(t *testing.T, n int) string {
	t.Helper()
	var out string
	testwait.Poll(t, fmt.Sprintf("%d lines", n), 10*time.Second, func() error {
		if out = w.out.String(); strings.Count(out, "\n") < n {
			return fmt.Errorf("%d lines:\n%s\nstderr:\n%s", strings.Count(out, "\n"), out, w.errOut)
		}
		return nil
	})
	return out
}

// stop cancels the watch, as SIGINT does, and returns its error.
func (w *watching) stop(t *testing.T) error {
	t.Helper()
	w.cancel()
	select {
	case err := <-w.done:
		w.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("audit watch did not end with its context")
		return nil
	}
}

// watchCursor is the present position, from a list answer.
func (b *bundle) watchCursor(t *testing.T) string {
	t.Helper()
	list, err := b.client.Servers(context.Background(), clientListOf(""))
	if err != nil || list.WatchCursor == "" {
		t.Fatalf("list: %v, watch_cursor %q", err, list.WatchCursor)
	}
	return list.WatchCursor
}

func TestAuditWatchPrintsEventsAsTheyCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.register(t, "before") // before the cursor: not printed
	cursor := b.watchCursor(t)

	piped := startAuditWatch(t, b, output.Table, false, func(o *auditWatchOptions) { o.Cursor = cursor })
	term := startAuditWatch(t, b, output.Table, true, func(o *auditWatchOptions) { o.Cursor = cursor })
	cal := b.register(t, "calendar")
	out := piped.waitFor(t, 1)
	if want := "2026-05-17T10:00:00Z\tmcp.server.registered\tcalendar\t\thealthy\n"; out != want {
		t.Fatalf("piped:\n%q\nwant\n%q", out, want)
	}
	b.clock.Advance(time.Minute)
	if _, err := b.client.Deregister(ctx, cal.ServerID); err != nil {
		t.Fatal(err)
	}
	out = piped.waitFor(t, 2)
	if want := "2026-05-17T10:01:00Z\tmcp.server.deregistered\tcalendar\thealthy\tderegistered\n"; !strings.HasSuffix(out, want) {
		t.Fatalf("piped:\n%q\nwant a last line\n%q", out, want)
	}
	out = term.waitFor(t, 3)
	want := "" +
		"OCCURRED              KIND                      MODULE                    FROM           TO\n" +
		"2026-05-17T10:00:00Z  mcp.server.registered     calendar                  -              healthy\n" +
		"2026-05-17T10:01:00Z  mcp.server.deregistered   calendar                  healthy        deregistered\n"
	if out != want {
		t.Fatalf("terminal:\n%s\nwant\n%s", out, want)
	}

	// Interrupted: exit 0, and where to resume from on stderr.
	if err := piped.stop(t); err != nil {
		t.Fatalf("audit watch after cancel: %v, want nil", err)
	}
	if !strings.HasPrefix(piped.errOut.String(), "Stopped. Resume with: --cursor ") {
		t.Fatalf("stderr %q", piped.errOut)
	}
}

func TestAuditWatchStructured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cursor := b.watchCursor(t)
	js := startAuditWatch(t, b, output.JSON, false, func(o *auditWatchOptions) { o.Cursor = cursor; o.Module = "mail" })
	ym := startAuditWatch(t, b, output.YAML, false, func(o *auditWatchOptions) { o.Cursor = cursor; o.Kind = registry.KindRegistered })
	b.register(t, "calendar")
	mail := b.register(t, "mail")
	if _, err := b.client.Deregister(context.Background(), mail.ServerID); err != nil {
		t.Fatal(err)
	}

	// NDJSON: one compact event object a line, of the module asked for.
	lines := strings.Split(strings.TrimSuffix(js.waitFor(t, 2), "\n"), "\n")
	for i, kind := range []registry.EventKind{registry.KindRegistered, registry.KindDeregistered} {
		var ev registry.Event
		if err := json.Unmarshal([]byte(lines[i]), &ev); err != nil || ev.Kind != kind || ev.ServerID != mail.ServerID {
			t.Fatalf("json line %d %q: %+v (%v)", i, lines[i], ev, err)
		}
		var raw map[string]any
		_ = json.Unmarshal([]byte(lines[i]), &raw)
		if _, ok := raw["event_id"]; !ok || len(raw) != 9 {
			t.Fatalf("json line %d is not the API's event object: %v", i, raw)
		}
	}

	// YAML: documents after "---", registrations only.
	var docs []registry.Event
	out := ym.waitFor(t, 2)
	testwait.Wait(10*time.Second, func() bool {
		out = ym.out.String()
		docs = docs[:0]
		dec := yaml.NewDecoder(strings.NewReader(out))
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				break
			}
			docs = append(docs, registry.Event{Kind: registry.EventKind(fmt.Sprint(m["kind"])), ModuleName: fmt.Sprint(m["module_name"])})
		}
		return len(docs) >= 2
	})
	if len(docs) != 2 || docs[0].ModuleName != "calendar" || docs[1].ModuleName != "mail" ||
		docs[1].Kind != registry.KindRegistered || !strings.HasPrefix(out, "---\n") || strings.Count(out, "---\n") != 2 {
		t.Fatalf("yaml:\n%s\n%+v", out, docs)
	}
}

func TestAuditWatchResumesAfterADrop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cursor := b.watchCursor(t)
	w := startAuditWatch(t, b, output.Table, false, func(o *auditWatchOptions) { o.Cursor = cursor })
	b.register(t, "first")
	w.waitFor(t, 1)

	b.srv.CloseClientConnections() // the stream drops
	// Registered through a client of its own: the shared one's idle
	// connections were closed too.
	c := client.New(b.url, b.token)
	defer c.CloseIdleConnections()
	for i := range 5 {
		if _, _, err := c.Register(context.Background(), api.RegisterRequest{
			ModuleName: fmt.Sprintf("after-%d", i), Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
		}, ""); err != nil {
			t.Fatal(err)
		}
	}
	out := w.waitFor(t, 6)
	var modules []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		modules = append(modules, strings.Split(l, "\t")[2])
	}
	if got := strings.Join(modules, " "); got != "first after-0 after-1 after-2 after-3 after-4" {
		t.Fatalf("events after a drop: %s (a gap or a duplicate)", got)
	}
	if !strings.Contains(w.errOut.String(), "reconnecting") {
		t.Fatalf("stderr does not say it reconnects: %q", w.errOut)
	}
	if err := w.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestAuditWatchRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "calendar")
	cursor := b.watchCursor(t)
	// Another store behind the same keys: the cursor is not a position of
	// its trail any more, as after a restart of mcpd --dev.
	twin := b.twin(t)
	w := startAuditWatch(t, twin, output.Table, false, func(o *auditWatchOptions) { o.Cursor = cursor })
	var err error
	select {
	case err = <-w.done:
		w.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("audit watch of an expired cursor did not end")
	}
	var ce *cursorExpiredError
	if !errors.As(err, &ce) || ce.p.Status != 410 || !strings.Contains(err.Error(), "list again") {
		t.Fatalf("error %v, want a 410 that says to list again", err)
	}
	if exitCode(failed(err)) != ExitFailed {
		t.Fatalf("exit code %d, want 1", exitCode(failed(err)))
	}

	// Through the whole command: exit 1, the problem and the advice on stderr.
	ts := newTestIO()
	code := Main(context.Background(), []string{"audit", "watch", "--server", twin.url, "--token", twin.token,
		"--config", writeFile(t, "config.yaml", ""), "--cursor", cursor}, ts.io)
	if code != ExitFailed || !strings.Contains(ts.errOut.String(), "Cursor expired") || !strings.Contains(ts.errOut.String(), "mcpctl audit list") {
		t.Fatalf("exit %d, stderr %q", code, ts.errOut)
	}

	// A cursor that is no position at all: 400, exit 1.
	w = startAuditWatch(t, b, output.Table, false, func(o *auditWatchOptions) { o.Cursor = "garbage" })
	err = <-w.done
	w.done <- err
	var p *api.Problem
	if !errors.As(err, &p) || p.Status != 400 || !strings.HasPrefix(err.Error(), `invalid --cursor "garbage": `) {
		t.Fatalf("bad cursor: %v, want a 400 problem that names --cursor", err)
	}
	if exitCode(failed(err)) != ExitFailed {
		t.Fatalf("bad cursor: exit code %d, want 1", exitCode(failed(err)))
	}
}
