package registry_test

import (
	"errors"
	"testing"

	"github.com/cyberos/mcpd/pkg/registry"
)

// TestValidateLabelControlCharacters: a description or a title is one line
// of text shown to people (the board, a registry client, a terminal): a
// control character (C0, DEL, C1), a line or paragraph separator, or a
// bidirectional embedding, override or isolate (the "Trojan Source"
// characters, which reorder what a reader sees) is refused naming the
// field. Letters of every script stay accepted, and so do the
// bidirectional marks (LRM, RLM, ALM) that right-to-left text needs.
func TestValidateLabelControlCharacters(t *testing.T) {
	t.Parallel()
	bad := []string{
		"a\x00b", "a\tb", "line\nline", "a\rb", "\x1b[31mred", "a\x1fb", "a\x7fb", // C0 and DEL
		"a\u0085b", "a\u009bb", // C1: next line, CSI
		"a\u2028b", "a\u2029b", // line and paragraph separators
		"abc\u202edcb", "\u202aabc", "abc\u202c", "a\u2068b", "a\u2069b", // embeddings, overrides, isolates
	}
	good := []string{
		"The team's calendar", "Café à la carte", "Weather 🌦️ now", "日历服务", "التقويم",
		"לוח שנה\u200f 2026", // with a right-to-left mark
		"👩\u200d💻 tools",     // an emoji sequence with a zero width joiner
	}
	for _, field := range []string{"description", "title"} {
		set := func(info *registry.ServerInfo, s string) {
			if field == "description" {
				info.Description = s
			} else {
				info.Title = s
			}
		}
		for _, s := range bad {
			info := validInfo()
			set(&info, s)
			var fe *registry.FieldError
			if err := info.Validate(); !errors.As(err, &fe) || fe.Field != field {
				t.Errorf("%s %q: Validate = %v, want a FieldError on %s", field, s, err, field)
			}
		}
		for _, s := range good {
			info := validInfo()
			set(&info, s)
			if err := info.Validate(); err != nil {
				t.Errorf("%s %q: Validate = %v, want nil", field, s, err)
			}
		}
	}
}
