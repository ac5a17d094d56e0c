package heartbeat_test

import (
	"testing"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// TestKindsTable: every kind of the table is named once, parses, leads to
// a status and comes from statuses (or none), and says what it is.
func TestKindsTable(t *testing.T) {
	t.Parallel()
	seen := map[heartbeat.EventKind]bool{}
	valid := func(s heartbeat.Status) bool { _, err := heartbeat.ParseStatus(string(s)); return err == nil }
	for _, k := range heartbeat.Kinds {
		if seen[k.Kind] {
			t.Errorf("kind %s twice", k.Kind)
		}
		seen[k.Kind] = true
		if got, err := heartbeat.ParseEventKind(string(k.Kind)); err != nil || got != k.Kind {
			t.Errorf("ParseEventKind(%s) = %s, %v", k.Kind, got, err)
		}
		if !valid(k.To) || len(k.From) == 0 || k.Help == "" {
			t.Errorf("kind %s: to %q, from %v, help %q", k.Kind, k.To, k.From, k.Help)
		}
		for _, from := range k.From {
			if from != heartbeat.NoStatus && !valid(from) {
				t.Errorf("kind %s: from %q", k.Kind, from)
			}
			if !k.Allows(from, k.To) || k.Kind.Spec().Kind != k.Kind {
				t.Errorf("kind %s: does not allow its own transition from %q", k.Kind, from)
			}
		}
	}
	if len(heartbeat.EventKinds) != len(heartbeat.Kinds) {
		t.Errorf("EventKinds %v, Kinds %d", heartbeat.EventKinds, len(heartbeat.Kinds))
	}
	if _, err := heartbeat.ParseEventKind("mcp.server.unknown"); err == nil {
		t.Error("ParseEventKind takes an unknown kind")
	}
	if heartbeat.EventKind("mcp.server.unknown").Spec().Allows(heartbeat.StatusHealthy, heartbeat.StatusHealthy) {
		t.Error("an unknown kind allows a transition")
	}
}
