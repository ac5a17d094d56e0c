package registry_test

import (
	"testing"

	"github.com/cyberos/mcpd/pkg/registry"
)

// TestKindsTable: every kind of the table is named once, parses, leads to
// a status and comes from statuses (or none), and says what it is.
func TestKindsTable(t *testing.T) {
	t.Parallel()
	seen := map[registry.EventKind]bool{}
	valid := func(s registry.Status) bool { _, err := registry.ParseStatus(string(s)); return err == nil }
	for _, k := range registry.Kinds {
		if seen[k.Kind] {
			t.Errorf("kind %s twice", k.Kind)
		}
		seen[k.Kind] = true
		if got, err := registry.ParseEventKind(string(k.Kind)); err != nil || got != k.Kind {
			t.Errorf("ParseEventKind(%s) = %s, %v", k.Kind, got, err)
		}
		if !valid(k.To) || len(k.From) == 0 || k.Help == "" {
			t.Errorf("kind %s: to %q, from %v, help %q", k.Kind, k.To, k.From, k.Help)
		}
		for _, from := range k.From {
			if from != registry.NoStatus && !valid(from) {
				t.Errorf("kind %s: from %q", k.Kind, from)
			}
			if !k.Allows(from, k.To) || k.Kind.Spec().Kind != k.Kind {
				t.Errorf("kind %s: does not allow its own transition from %q", k.Kind, from)
			}
		}
	}
	if len(registry.EventKinds) != len(registry.Kinds) {
		t.Errorf("EventKinds %v, Kinds %d", registry.EventKinds, len(registry.Kinds))
	}
	if _, err := registry.ParseEventKind("mcp.server.unknown"); err == nil {
		t.Error("ParseEventKind takes an unknown kind")
	}
	if registry.EventKind("mcp.server.unknown").Spec().Allows(registry.StatusHealthy, registry.StatusHealthy) {
		t.Error("an unknown kind allows a transition")
	}
}
