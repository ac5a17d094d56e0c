package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

func TestRegisterRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ts := newTestIO()
	opts := &registerOptions{
		IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON),
		Module: "calendar", Version: "1.3.2", Protocols: []string{"2025-06-18"},
		Capabilities: json.RawMessage(`{"tools":{"listChanged":true}}`),
		SkillInfos:   []registry.SkillInfo{{Name: "list-events", Description: "List events"}},
		Traceparent:  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	if err := registerRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(ts.out.Bytes(), &got); err != nil {
		t.Fatalf("register -o json printed %q: %v", ts.out, err)
	}
	id, err := uuid.Parse(fmt.Sprint(got["server_id"]))
	if err != nil {
		t.Fatalf("server_id %v", got["server_id"])
	}
	want := fmt.Sprintf(`{
  "server_id": %q,
  "tenant_id": %q,
  "module_name": "calendar",
  "version": "1.3.2",
  "supported_protocols": [
    "2025-06-18"
  ],
  "capability_advertisement": {
    "tools": {
      "listChanged": true
    }
  },
  "status": "healthy",
  "last_heartbeat_at": "2026-05-17T10:00:00Z",
  "registered_at": "2026-05-17T10:00:00Z",
  "deregistered_at": null,
  "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
  "heartbeat_interval_seconds": 10,
  "remotes": []
}
`, id, b.tenant)
	if ts.out.String() != want {
		t.Fatalf("register -o json:\n%s\nwant\n%s", ts.out, want)
	}
	if ts.errOut.Len() != 0 {
		t.Fatalf("stderr %q on a pipe, want nothing", ts.errOut)
	}

	// Registering again updates the same server; on a terminal stderr says so.
	ts = newTestIO()
	ts.errTTY = true
	opts.IO, opts.Printer, opts.Version = ts.io, b.printer(ts, output.Table), "1.4.0"
	if err := registerRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if want := "Updated registration of calendar (" + id.String() + ")\n"; ts.errOut.String() != want {
		t.Fatalf("stderr %q, want %q", ts.errOut, want)
	}
	if !strings.Contains(ts.out.String(), "server_id\t"+id.String()+"\n") || !strings.Contains(ts.out.String(), "version\t1.4.0\n") {
		t.Fatalf("re-register printed:\n%s", ts.out)
	}
}

func TestListRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mail := b.register(t, "mail")
	cal := b.register(t, "calendar")
	b.clock.Advance(25 * time.Second)
	ctx := context.Background()

	run := func(f output.Format, tty bool, mod func(*listOptions)) *testStreams {
		t.Helper()
		ts := newTestIO()
		ts.outTTY = tty
		opts := &listOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, f)}
		if mod != nil {
			mod(opts)
		}
		if err := listRun(ctx, opts); err != nil {
			t.Fatal(err)
		}
		return ts
	}

	ts := run(output.Table, false, nil)
	want := "calendar\t1.3.2\thealthy\t2025-06-18\t2026-05-17T10:00:00Z\nmail\t1.3.2\thealthy\t2025-06-18\t2026-05-17T10:00:00Z\n"
	if ts.out.String() != want {
		t.Fatalf("piped list:\n%q\nwant\n%q", ts.out, want)
	}

	ts = run(output.Table, true, nil)
	want = "" +
		"MODULE     VERSION   STATUS    PROTOCOLS    LAST HEARTBEAT\n" +
		"calendar   1.3.2     healthy   2025-06-18   25s ago\n" +
		"mail       1.3.2     healthy   2025-06-18   25s ago\n"
	if ts.out.String() != want {
		t.Fatalf("terminal list:\n%s\nwant\n%s", ts.out, want)
	}

	ts = run(output.Wide, false, func(o *listOptions) { o.Limit = 1 })
	want = cal.ServerID.String() + "\tcalendar\t1.3.2\thealthy\t1\t2025-06-18\t2026-05-17T10:00:00Z\t2026-05-17T10:00:00Z\t" + cal.TraceID + "\t\n"
	if ts.out.String() != want {
		t.Fatalf("wide --limit 1:\n%q\nwant\n%q", ts.out, want)
	}

	ts = run(output.JSON, false, func(o *listOptions) { o.Module = "mail" })
	var list []registry.Server
	if err := json.Unmarshal(ts.out.Bytes(), &list); err != nil || len(list) != 1 || list[0].ServerID != mail.ServerID {
		t.Fatalf("json --module mail printed %s (%v)", ts.out, err)
	}
	if !strings.HasPrefix(ts.out.String(), "[\n  {\n    \"server_id\": ") {
		t.Fatalf("json list is not an indented array of server objects:\n%s", ts.out)
	}

	for _, f := range []output.Format{output.JSON, output.YAML} {
		ts = run(f, false, func(o *listOptions) { o.Status = registry.StatusUnhealthy })
		if ts.out.String() != "[]\n" || ts.errOut.Len() != 0 {
			t.Fatalf("%s empty list: stdout %q stderr %q, want [] and nothing", f, ts.out, ts.errOut)
		}
	}
	ts = run(output.Table, false, func(o *listOptions) { o.Status = registry.StatusUnhealthy })
	if ts.out.Len() != 0 || ts.errOut.String() != "No servers found\n" {
		t.Fatalf("empty list: stdout %q stderr %q", ts.out, ts.errOut)
	}
}

func TestServerRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar", registry.SkillInfo{Name: "list-events", Description: "List events"}, registry.SkillInfo{Name: "create-event"})
	ctx := context.Background()
	b.clock.Advance(15 * time.Second)

	// heartbeat: the object as YAML, with the JSON names.
	ts := newTestIO()
	if err := heartbeatRun(ctx, &serverIDOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.YAML), ServerID: srv.ServerID}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`capability_advertisement: null
deregistered_at: null
heartbeat_interval_seconds: 10
last_heartbeat_at: "2026-05-17T10:00:15Z"
module_name: calendar
registered_at: "2026-05-17T10:00:00Z"
remotes: []
server_id: %s
status: healthy
supported_protocols:
  - "2025-06-18"
tenant_id: %s
trace_id: %s
version: 1.3.2
`, srv.ServerID, b.tenant, srv.TraceID)
	if ts.out.String() != want {
		t.Fatalf("heartbeat -o yaml:\n%s\nwant\n%s", ts.out, want)
	}

	// get, piped table: one field a line.
	ts = newTestIO()
	if err := getRun(ctx, &serverIDOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.Table), ServerID: srv.ServerID}); err != nil {
		t.Fatal(err)
	}
	want = "server_id\t" + srv.ServerID.String() + "\n" +
		"tenant_id\t" + b.tenant.String() + "\n" +
		"module_name\tcalendar\n" +
		"version\t1.3.2\n" +
		"status\thealthy\n" +
		"supported_protocols\t2025-06-18\n" +
		"capability_advertisement\t\n" +
		"last_heartbeat_at\t2026-05-17T10:00:15Z\n" +
		"registered_at\t2026-05-17T10:00:00Z\n" +
		"deregistered_at\t\n" +
		"trace_id\t" + srv.TraceID + "\n" +
		"heartbeat_interval_seconds\t10\n"
	if ts.out.String() != want {
		t.Fatalf("get:\n%q\nwant\n%q", ts.out, want)
	}

	// deregister, then skills: every skill unavailable.
	ts = newTestIO()
	if err := deregisterRun(ctx, &serverIDOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON), ServerID: srv.ServerID}); err != nil {
		t.Fatal(err)
	}
	var got registry.Server
	if err := json.Unmarshal(ts.out.Bytes(), &got); err != nil || got.Status != registry.StatusDeregistered || got.DeregisteredAt == nil {
		t.Fatalf("deregister -o json printed %s (%v)", ts.out, err)
	}
	ts = newTestIO()
	if err := skillsRun(ctx, &serverIDOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.Table), ServerID: srv.ServerID}); err != nil {
		t.Fatal(err)
	}
	want = "create-event\tno\tserver_deregistered\t\nlist-events\tno\tserver_deregistered\tList events\n"
	if ts.out.String() != want {
		t.Fatalf("skills:\n%q\nwant\n%q", ts.out, want)
	}

	// A heartbeat of a deregistered server is the API's 409 problem.
	ts = newTestIO()
	err := heartbeatRun(ctx, &serverIDOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.Table), ServerID: srv.ServerID})
	var p *api.Problem
	if !errors.As(err, &p) || p.Status != http.StatusConflict {
		t.Fatalf("heartbeat after deregister: %v, want a 409 problem", err)
	}
}

func TestAuditListRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar")
	other := b.register(t, "mail")
	ctx := context.Background()
	b.clock.Advance(time.Minute)
	if _, err := b.client.Deregister(ctx, srv.ServerID); err != nil {
		t.Fatal(err)
	}

	ts := newTestIO()
	sid := srv.ServerID
	if err := auditListRun(ctx, &auditListOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.Table), ServerID: &sid}); err != nil {
		t.Fatal(err)
	}
	want := "2026-05-17T10:00:00Z\tmcp.server.registered\tcalendar\t\thealthy\n" +
		"2026-05-17T10:01:00Z\tmcp.server.deregistered\tcalendar\thealthy\tderegistered\n"
	if ts.out.String() != want {
		t.Fatalf("audit list --server-id:\n%q\nwant\n%q", ts.out, want)
	}

	ts = newTestIO()
	if err := auditListRun(ctx, &auditListOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON), Kind: registry.KindRegistered}); err != nil {
		t.Fatal(err)
	}
	var events []registry.Event
	if err := json.Unmarshal(ts.out.Bytes(), &events); err != nil || len(events) != 2 || events[1].ServerID != other.ServerID {
		t.Fatalf("audit list --kind registered -o json printed %s (%v)", ts.out, err)
	}

	ts = newTestIO()
	if err := auditListRun(ctx, &auditListOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.Table), Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(ts.out.String(), "\n"); got != 1 {
		t.Fatalf("audit list --limit 1 printed %d lines:\n%s", got, ts.out)
	}
}

// register sends the remotes, description and title, and mcpd returns them.
func TestRegisterRunRemotes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ts := newTestIO()
	remotes := []registry.Remote{{Type: registry.RemoteSSE, URL: "https://cal.example/sse"}}
	opts := &registerOptions{
		IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON),
		Module: "calendar", Version: "1.3.2", Protocols: []string{"2025-06-18"},
		RemoteList: remotes, Description: "The calendar", Title: "Calendar",
	}
	if err := registerRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	var got registry.Server
	if err := json.Unmarshal(ts.out.Bytes(), &got); err != nil {
		t.Fatalf("register -o json printed %q: %v", ts.out, err)
	}
	if !reflect.DeepEqual(got.Remotes, remotes) || got.Description != "The calendar" || got.Title != "Calendar" {
		t.Fatalf("registered %+v", got)
	}
}

// A module name stands for the tenant's server of that module, whatever
// its status: deregister by module, then get and heartbeat it by module
// (the heartbeat is refused as for its id); a module without a server is
// a failure that names it.
func TestServerRunsByModule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := b.register(t, "calendar")
	b.register(t, "mail")
	ctx := context.Background()
	ts := newTestIO()
	if err := deregisterRun(ctx, &serverIDOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON), Module: "calendar"}); err != nil {
		t.Fatal(err)
	}
	ts = newTestIO()
	if err := getRun(ctx, &serverIDOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON), Module: "calendar"}); err != nil {
		t.Fatal(err)
	}
	var got registry.Server
	if err := json.Unmarshal(ts.out.Bytes(), &got); err != nil || got.ServerID != srv.ServerID || got.Status != registry.StatusDeregistered {
		t.Fatalf("get calendar after its deregistration: %s, %v", ts.out, err)
	}
	ts = newTestIO()
	err := heartbeatRun(ctx, &serverIDOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON), Module: "calendar"})
	var prob *api.Problem
	if !errors.As(err, &prob) || prob.Status != http.StatusConflict {
		t.Fatalf("heartbeat of a deregistered module: %v, want its 409", err)
	}
	err = skillsRun(ctx, &serverIDOptions{IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON), Module: "search"})
	if err == nil || err.Error() != `no server of module "search" for the token's tenant` {
		t.Fatalf("skills of a module without a server: %v", err)
	}
}
