package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

var now = time.Date(2026, 5, 17, 10, 0, 17, 0, time.UTC)

func fixture() []registry.Server {
	dereg := now.Add(-90 * time.Second)
	return []registry.Server{
		{
			ServerID:                uuid.MustParse("6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c"),
			TenantID:                uuid.MustParse("0b6e3c1a-2f4d-4e5b-8a9c-7d6e5f4a3b2c"),
			ModuleName:              "calendar",
			Version:                 "1.3.2",
			SupportedProtocols:      []string{"2025-06-18", "2025-03-26"},
			CapabilityAdvertisement: json.RawMessage(`{"tools":{"listChanged":true},"prompts":{}}`),
			Status:                  registry.StatusHealthy,
			LastHeartbeatAt:         now.Add(-12 * time.Second),
			RegisteredAt:            now.Add(-2 * time.Hour),
			TraceID:                 "4bf92f3577b34da6a3ce929d0e0e4736",
			HeartbeatIntervalSecs:   10,
			Remotes:                 []registry.Remote{},
		},
		{
			ServerID:              uuid.MustParse("7a2d3b5f-9c1e-4d4f-8a7b-2e3f4a5b6c7d"),
			TenantID:              uuid.MustParse("0b6e3c1a-2f4d-4e5b-8a9c-7d6e5f4a3b2c"),
			ModuleName:            "mail",
			Version:               "0.9.0",
			SupportedProtocols:    []string{"2025-06-18"},
			Status:                registry.StatusDeregistered,
			LastHeartbeatAt:       now.Add(-3 * time.Minute),
			RegisteredAt:          now.Add(-50 * time.Hour),
			DeregisteredAt:        &dereg,
			TraceID:               "00f067aa0ba902b700f067aa0ba902b7",
			HeartbeatIntervalSecs: 10,
			Remotes:               []registry.Remote{},
		},
	}
}

func newPrinter(f Format, terminal, color bool) (*Printer, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &Printer{Out: &out, ErrOut: &errOut, Format: f, Terminal: terminal, Color: color, Now: func() time.Time { return now }}, &out, &errOut
}

func TestAge(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ago  time.Duration
		want string
	}{
		{-5 * time.Second, "just now"},
		{0, "just now"},
		{999 * time.Millisecond, "just now"},
		{time.Second, "1s ago"},
		{12 * time.Second, "12s ago"},
		{59*time.Second + 999*time.Millisecond, "59s ago"},
		{time.Minute, "1m ago"},
		{3*time.Minute + 59*time.Second, "3m ago"},
		{2 * time.Hour, "2h ago"},
		{23*time.Hour + 59*time.Minute, "23h ago"},
		{50 * time.Hour, "2d ago"},
	}
	for _, c := range cases {
		if got := Age(now.Add(-c.ago), now); got != c.want {
			t.Errorf("Age(now-%s) = %q, want %q", c.ago, got, c.want)
		}
	}
	if got := Age(time.Time{}, now); got != "never" {
		t.Errorf("Age(zero) = %q, want never", got)
	}
}

func TestParseFormat(t *testing.T) {
	t.Parallel()
	for _, f := range Formats {
		if got, err := ParseFormat(string(f)); err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	for _, bad := range []string{"", "JSON", "xml", "tabel"} {
		if _, err := ParseFormat(bad); err == nil || !strings.Contains(err.Error(), "table|wide|json|yaml") {
			t.Errorf("ParseFormat(%q) error = %v, want one naming the formats", bad, err)
		}
	}
}

func TestServersPiped(t *testing.T) {
	t.Parallel()
	p, out, errOut := newPrinter(Table, false, false)
	if err := p.Servers(fixture()); err != nil {
		t.Fatal(err)
	}
	want := "calendar\t1.3.2\thealthy\t2025-06-18,2025-03-26\t2026-05-17T10:00:05Z\n" +
		"mail\t0.9.0\tderegistered\t2025-06-18\t2026-05-17T09:57:17Z\n"
	if got := out.String(); got != want {
		t.Fatalf("piped table:\n%q\nwant\n%q", got, want)
	}
	if errOut.Len() != 0 {
		t.Fatalf("stderr = %q, want nothing", errOut)
	}
}

func TestServersWidePiped(t *testing.T) {
	t.Parallel()
	p, out, _ := newPrinter(Wide, false, false)
	servers := fixture()
	ratio := 0.99931
	ratios := map[uuid.UUID]registry.AvailabilityRatio{servers[0].ServerID: {ServerID: servers[0].ServerID, ObservedSeconds: 86400, AvailableRatio: &ratio}}
	if err := p.ServersWithAvailability(servers, ratios); err != nil {
		t.Fatal(err)
	}
	want := "6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c\tcalendar\t1.3.2\thealthy\t0.99931\t2025-06-18,2025-03-26\t2026-05-17T10:00:05Z\t2026-05-17T08:00:17Z\t4bf92f3577b34da6a3ce929d0e0e4736\tprompts,tools\n" +
		"7a2d3b5f-9c1e-4d4f-8a7b-2e3f4a5b6c7d\tmail\t0.9.0\tderegistered\t\t2025-06-18\t2026-05-17T09:57:17Z\t2026-05-15T08:00:17Z\t00f067aa0ba902b700f067aa0ba902b7\t\n"
	if got := out.String(); got != want {
		t.Fatalf("piped wide:\n%q\nwant\n%q", got, want)
	}
}

func TestServersTerminal(t *testing.T) {
	t.Parallel()
	p, out, _ := newPrinter(Table, true, false)
	if err := p.Servers(fixture()); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"MODULE     VERSION   STATUS         PROTOCOLS               LAST HEARTBEAT\n" +
		"calendar   1.3.2     healthy        2025-06-18,2025-03-26   12s ago\n" +
		"mail       0.9.0     deregistered   2025-06-18              3m ago\n"
	if got := out.String(); got != want {
		t.Fatalf("terminal table:\n%s\nwant\n%s", got, want)
	}
}

func TestServersTerminalColor(t *testing.T) {
	t.Parallel()
	p, out, _ := newPrinter(Table, true, true)
	if err := p.Servers(fixture()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, ansiGreen+"healthy"+ansiReset) || !strings.Contains(got, ansiFaint+"deregistered"+ansiReset) {
		t.Fatalf("coloured table lacks coloured statuses:\n%q", got)
	}
	// The colour codes take no room: the columns after STATUS stay aligned.
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	col := strings.Index(lines[0], "PROTOCOLS")
	for _, l := range lines[1:] {
		plain := strings.NewReplacer(ansiGreen, "", ansiFaint, "", ansiReset, "").Replace(l)
		if strings.Index(plain, "2025-06-18") != col {
			t.Fatalf("misaligned row %q (protocols at %d, header at %d)", plain, strings.Index(plain, "2025-06-18"), col)
		}
	}
}

func TestColorEnabled(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "NO_COLOR" {
				return v
			}
			return ""
		}
	}
	if !ColorEnabled(true, env("")) {
		t.Error("terminal without NO_COLOR: want colour")
	}
	if ColorEnabled(true, env("1")) {
		t.Error("NO_COLOR=1: want no colour")
	}
	if ColorEnabled(false, env("")) {
		t.Error("not a terminal: want no colour")
	}
}

func TestServersJSON(t *testing.T) {
	t.Parallel()
	p, out, _ := newPrinter(JSON, false, false)
	if err := p.Servers(fixture()[:1]); err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "server_id": "6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c",
    "tenant_id": "0b6e3c1a-2f4d-4e5b-8a9c-7d6e5f4a3b2c",
    "module_name": "calendar",
    "version": "1.3.2",
    "supported_protocols": [
      "2025-06-18",
      "2025-03-26"
    ],
    "capability_advertisement": {
      "tools": {
        "listChanged": true
      },
      "prompts": {}
    },
    "status": "healthy",
    "last_heartbeat_at": "2026-05-17T10:00:05Z",
    "registered_at": "2026-05-17T08:00:17Z",
    "deregistered_at": null,
    "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    "heartbeat_interval_seconds": 10,
    "remotes": []
  }
]
`
	if got := out.String(); got != want {
		t.Fatalf("json:\n%s\nwant\n%s", got, want)
	}
}

func TestServerYAML(t *testing.T) {
	t.Parallel()
	p, out, _ := newPrinter(YAML, false, false)
	if err := p.Server(fixture()[1]); err != nil {
		t.Fatal(err)
	}
	want := `capability_advertisement: null
deregistered_at: "2026-05-17T09:58:47Z"
heartbeat_interval_seconds: 10
last_heartbeat_at: "2026-05-17T09:57:17Z"
module_name: mail
registered_at: "2026-05-15T08:00:17Z"
remotes: []
server_id: 7a2d3b5f-9c1e-4d4f-8a7b-2e3f4a5b6c7d
status: deregistered
supported_protocols:
  - "2025-06-18"
tenant_id: 0b6e3c1a-2f4d-4e5b-8a9c-7d6e5f4a3b2c
trace_id: 00f067aa0ba902b700f067aa0ba902b7
version: 0.9.0
`
	if got := out.String(); got != want {
		t.Fatalf("yaml:\n%s\nwant\n%s", got, want)
	}
}

func TestEmptyLists(t *testing.T) {
	t.Parallel()
	for _, f := range []Format{Table, Wide} {
		p, out, errOut := newPrinter(f, false, false)
		if err := p.Servers(nil); err != nil {
			t.Fatal(err)
		}
		if out.Len() != 0 || errOut.String() != "No servers found\n" {
			t.Errorf("%s: stdout %q stderr %q, want nothing and \"No servers found\"", f, out, errOut)
		}
	}
	for f, want := range map[Format]string{JSON: "[]\n", YAML: "[]\n"} {
		p, out, errOut := newPrinter(f, false, false)
		if err := p.Servers(nil); err != nil {
			t.Fatal(err)
		}
		if out.String() != want || errOut.Len() != 0 {
			t.Errorf("%s: stdout %q stderr %q, want %q and nothing", f, out, errOut, want)
		}
	}
	p, _, errOut := newPrinter(Table, true, false)
	_ = p.Skills(nil)
	_ = p.Events([]registry.Event{})
	if got := errOut.String(); got != "No skills found\nNo audit events found\n" {
		t.Errorf("empty skills and events said %q", got)
	}
}

func TestServerDetail(t *testing.T) {
	t.Parallel()
	p, out, _ := newPrinter(Table, false, false)
	if err := p.Server(fixture()[0]); err != nil {
		t.Fatal(err)
	}
	want := "server_id\t6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c\n" +
		"tenant_id\t0b6e3c1a-2f4d-4e5b-8a9c-7d6e5f4a3b2c\n" +
		"module_name\tcalendar\n" +
		"version\t1.3.2\n" +
		"status\thealthy\n" +
		"supported_protocols\t2025-06-18,2025-03-26\n" +
		"capability_advertisement\tprompts,tools\n" +
		"last_heartbeat_at\t2026-05-17T10:00:05Z\n" +
		"registered_at\t2026-05-17T08:00:17Z\n" +
		"deregistered_at\t\n" +
		"trace_id\t4bf92f3577b34da6a3ce929d0e0e4736\n" +
		"heartbeat_interval_seconds\t10\n"
	if got := out.String(); got != want {
		t.Fatalf("piped detail:\n%q\nwant\n%q", got, want)
	}

	p, out, _ = newPrinter(Table, true, false)
	if err := p.Server(fixture()[1]); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Server ID:            7a2d3b5f-9c1e-4d4f-8a7b-2e3f4a5b6c7d\n",
		"Status:               deregistered\n",
		"Capabilities:         -\n",
		"Last heartbeat:       3m ago\n",
		"Deregistered:         1m ago\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("terminal detail lacks %q:\n%s", line, out)
		}
	}
}

func TestSkillsAndEvents(t *testing.T) {
	t.Parallel()
	reason := registry.ReasonServerUnhealthy
	skills := []registry.Skill{
		{SkillID: uuid.MustParse("11111111-1111-4111-8111-111111111111"), Name: "list-events", Description: "List\tevents\nof a day", Available: true},
		{SkillID: uuid.MustParse("22222222-2222-4222-8222-222222222222"), Name: "create-event", Available: false, UnavailableReason: &reason},
	}
	p, out, _ := newPrinter(Table, false, false)
	if err := p.Skills(skills); err != nil {
		t.Fatal(err)
	}
	want := "list-events\tyes\t\tList events of a day\ncreate-event\tno\tserver_unhealthy\t\n"
	if got := out.String(); got != want {
		t.Fatalf("skills:\n%q\nwant\n%q", got, want)
	}

	from := registry.StatusHealthy
	events := []registry.Event{
		{EventID: uuid.MustParse("33333333-3333-4333-8333-333333333333"), Kind: registry.KindRegistered, ServerID: skills[0].SkillID, ModuleName: "calendar", ToStatus: registry.StatusHealthy, OccurredAt: now.Add(-time.Hour)},
		{EventID: uuid.MustParse("44444444-4444-4444-8444-444444444444"), Kind: registry.KindDegraded, ServerID: skills[0].SkillID, ModuleName: "calendar", FromStatus: &from, ToStatus: registry.StatusDegraded, OccurredAt: now.Add(-20 * time.Second)},
	}
	p, out, _ = newPrinter(Table, true, false)
	if err := p.Events(events); err != nil {
		t.Fatal(err)
	}
	want = "" +
		"OCCURRED   KIND                    MODULE     FROM      TO\n" +
		"1h ago     mcp.server.registered   calendar   -         healthy\n" +
		"20s ago    mcp.server.degraded     calendar   healthy   degraded\n"
	if got := out.String(); got != want {
		t.Fatalf("events:\n%s\nwant\n%s", got, want)
	}
}

func TestObject(t *testing.T) {
	t.Parallel()
	v := struct {
		Version uint `json:"version"`
		Dirty   bool `json:"dirty"`
	}{4, false}
	kv := []KV{{"Applied version", "version", "4"}, {"Dirty", "dirty", "false"}}
	p, out, _ := newPrinter(Table, false, false)
	if err := p.Object(v, kv); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "version\t4\ndirty\tfalse\n" {
		t.Fatalf("piped object %q", got)
	}
	p, out, _ = newPrinter(YAML, false, false)
	if err := p.Object(v, kv); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "dirty: false\nversion: 4\n" {
		t.Fatalf("yaml object %q", got)
	}
}

func TestCapabilityKeys(t *testing.T) {
	t.Parallel()
	if got := CapabilityKeys(json.RawMessage(`{"b":1,"a":{}}`)); strings.Join(got, ",") != "a,b" {
		t.Errorf("keys = %v", got)
	}
	for _, raw := range []string{"", "null", "[]", "{}", "not json"} {
		if got := CapabilityKeys(json.RawMessage(raw)); got != nil {
			t.Errorf("CapabilityKeys(%q) = %v, want nil", raw, got)
		}
	}
}

// TestTablesEscapeControlCharacters: text from the server never reaches
// the terminal raw: a skill stored before the rule ("evil\x1b[31mRED",
// "d\x1b[2J") prints its escapes as text, on a terminal with colour, piped,
// and in the event stream, while mcpd's own colours stay.
func TestTablesEscapeControlCharacters(t *testing.T) {
	t.Parallel()
	skills := []registry.Skill{{SkillID: uuid.MustParse("11111111-1111-4111-8111-111111111111"),
		Name: "evil\x1b[31mRED", Description: "d\x1b[2J \u202eabc\x9b\xff", Available: true}}
	entries := []registry.SkillEntry{{Skill: skills[0], ModuleName: "m\x07", Version: "1.0.0",
		ServerStatus: registry.StatusHealthy, SupportedProtocols: []string{"2025-06-18"}}}
	servers := fixture()[:1]
	servers[0].ModuleName = "cal\x1b]0;title\x07"
	servers[0].CapabilityAdvertisement = json.RawMessage(`{"\u001b[2J":{}}`)
	events := []registry.Event{{EventID: uuid.New(), Kind: "k\x1b[K", ModuleName: "m\r\x1b[1A",
		ToStatus: registry.StatusHealthy, OccurredAt: now}}
	for _, f := range []Format{Table, Wide} {
		for _, terminal := range []bool{true, false} {
			p, out, _ := newPrinter(f, terminal, terminal)
			for _, print := range []func() error{
				func() error { return p.Skills(skills) },
				func() error { return p.SkillDirectory(entries) },
				func() error { return p.Servers(servers) },
				func() error { return p.Server(servers[0]) },
				func() error { return p.Events(events) },
				func() error { return p.EventStream().Event(events[0]) },
				func() error { return p.Object(nil, []KV{{Label: "Name", Key: "name", Value: "x\x1b[2J"}}) },
			} {
				if err := print(); err != nil {
					t.Fatal(err)
				}
			}
			got := out.String()
			// What is left once mcpd's own colours are taken out.
			plain := got
			for _, c := range []string{ansiReset, ansiGreen, ansiYellow, ansiRed, ansiFaint} {
				plain = strings.ReplaceAll(plain, c, "")
			}
			if i := strings.IndexFunc(plain, func(r rune) bool {
				return r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u202e' || r == '\uFFFD')
			}); i >= 0 {
				t.Errorf("%s terminal=%t: raw control character at %d:\n%q", f, terminal, i, got)
			}
			for _, want := range []string{`evil\x1b[31mRED`, `d\x1b[2J \u202eabc\x9b\xff`, `cal\x1b]0;title\x07`, `m \x1b[1A`} {
				if f == Table && strings.HasPrefix(want, "d") {
					continue // the table of skills has the description; the directory's only in wide
				}
				if !strings.Contains(got, want) {
					t.Errorf("%s terminal=%t: %q missing from\n%s", f, terminal, want, got)
				}
			}
			if terminal && !strings.Contains(got, ansiGreen) {
				t.Errorf("%s: mcpd's colours are gone:\n%q", f, got)
			}
		}
	}
}
