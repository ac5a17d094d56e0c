package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

func streamFixture() []registry.Event {
	healthy := registry.StatusHealthy
	id := uuid.MustParse("6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c")
	return []registry.Event{
		{EventID: uuid.MustParse("11111111-1111-4111-8111-111111111111"), Kind: registry.KindRegistered, ServerID: id,
			ModuleName: "calendar", ToStatus: registry.StatusHealthy, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			OccurredAt: now, Body: registry.EventBody{ServerID: id, ModuleName: "calendar"}},
		{EventID: uuid.MustParse("22222222-2222-4222-8222-222222222222"), Kind: registry.KindUnhealthy, ServerID: id,
			ModuleName: "calendar", FromStatus: &healthy, ToStatus: registry.StatusUnhealthy,
			OccurredAt: now.Add(30e9), Body: registry.EventBody{SkillsAffected: []string{"a", "b"}}},
	}
}

func TestEventStreamTerminalColour(t *testing.T) {
	var out bytes.Buffer
	s := (&Printer{Out: &out, Terminal: true, Color: true}).EventStream()
	for _, e := range streamFixture() {
		if err := s.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	want := "" +
		"OCCURRED              KIND                      MODULE                    FROM           TO\n" +
		"2026-05-17T10:00:17Z  mcp.server.registered     calendar                  -              \x1b[32mhealthy\x1b[0m\n" +
		"2026-05-17T10:00:47Z  mcp.server.unhealthy      calendar                  \x1b[32mhealthy\x1b[0m        \x1b[31munhealthy\x1b[0m\n"
	if out.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", out.String(), want)
	}
}

func TestEventStreamWideAndStructured(t *testing.T) {
	var out bytes.Buffer
	s := (&Printer{Out: &out, Format: Wide}).EventStream()
	for _, e := range streamFixture() {
		if err := s.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || strings.Count(lines[1], "\t") != 8 || !strings.HasSuffix(lines[1], "\ta,b") ||
		!strings.Contains(lines[0], "\tmcp.server.registered\t6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c\tcalendar\t\thealthy\t") {
		t.Fatalf("wide piped:\n%s", out.String())
	}

	out.Reset()
	s = (&Printer{Out: &out, Format: JSON}).EventStream()
	for _, e := range streamFixture() {
		_ = s.Event(e)
	}
	lines = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var e registry.Event
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &e) != nil || e.Kind != registry.KindUnhealthy {
		t.Fatalf("ndjson:\n%s", out.String())
	}

	out.Reset()
	s = (&Printer{Out: &out, Format: YAML}).EventStream()
	for _, e := range streamFixture() {
		_ = s.Event(e)
	}
	if got := out.String(); !strings.HasPrefix(got, "---\nbody:\n") || strings.Count(got, "---\n") != 2 ||
		!strings.Contains(got, "kind: mcp.server.unhealthy\n") {
		t.Fatalf("yaml:\n%s", got)
	}
}

func TestSkillDirectory(t *testing.T) {
	reason := "server_unhealthy"
	skills := []registry.SkillEntry{
		{Skill: registry.Skill{Name: "search", Available: true}, ModuleName: "calendar", ServerStatus: registry.StatusHealthy,
			Version: "1.3.2", SupportedProtocols: []string{"2025-06-18"}},
		{Skill: registry.Skill{Name: "search", UnavailableReason: &reason, Description: "Find"}, ModuleName: "mail",
			ServerStatus: registry.StatusUnhealthy, Version: "0.9.0", SupportedProtocols: []string{"2025-06-18", "2025-03-26"}},
	}
	var out bytes.Buffer
	if err := (&Printer{Out: &out, Format: Wide}).SkillDirectory(skills); err != nil {
		t.Fatal(err)
	}
	want := "search\tcalendar\t1.3.2\tyes\t\thealthy\t2025-06-18\t" + uuid.Nil.String() + "\t" + uuid.Nil.String() + "\t\n" +
		"search\tmail\t0.9.0\tno\tserver_unhealthy\tunhealthy\t2025-06-18,2025-03-26\t" + uuid.Nil.String() + "\t" + uuid.Nil.String() + "\tFind\n"
	if out.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", out.String(), want)
	}
}
