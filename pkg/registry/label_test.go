package registry_test

import (
	"errors"
	"strings"
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

// TestValidateSkillControlCharacters: a skill's name and description are
// shown as one line too (mcpctl's tables, the board, find_skill): the
// characters refused in a description are refused there, naming
// skills[i].name or skills[i].description ("evil\x1b[31mRED" was stored and
// printed raw by mcpctl).
func TestValidateSkillControlCharacters(t *testing.T) {
	t.Parallel()
	bad := []string{"evil\x1b[31mRED", "d\x1b[2J", "a\tb", "line\nline", "a\u0085b", "a\u2028b", "abc\u202edcb", "a\u2066b"}
	for _, s := range bad {
		for _, field := range []string{"name", "description"} {
			info := validInfo()
			info.Skills = []registry.SkillInfo{{Name: "ok", Description: "fine"}, {Name: "other", Description: "fine"}}
			if field == "name" {
				info.Skills[1].Name = s
			} else {
				info.Skills[1].Description = s
			}
			var fe *registry.FieldError
			if err := info.Validate(); !errors.As(err, &fe) || fe.Field != "skills[1]."+field {
				t.Errorf("skill %s %q: Validate = %v, want a FieldError on skills[1].%s", field, s, err, field)
			}
		}
	}
	info := validInfo()
	info.Skills = []registry.SkillInfo{{Name: "日历 search", Description: "Finds events. Café, التقويم\u200f, 👩\u200d💻 " +
		"and a description longer than a server's description may be" + strings.Repeat(", longer", 20)}}
	if err := info.Validate(); err != nil {
		t.Fatalf("a skill of plain text: %v", err)
	}
}

// TestOneLine: text taken from elsewhere (an MCP tool's description) is
// made one line that Validate accepts.
func TestOneLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Search the web.\n\n  Args:\n\tquery: words\r\n": "Search the web. Args: query: words",
		"\x1b[31mred\x1b[0m":                             "[31mred [0m",
		"abc\u202edcb\u2069 x\u2028y\u0085z":             "abcdcb x y z",
		"plain":                                          "plain",
		"a\x00b\xff":                                     "a b\uFFFD",
	} {
		got := registry.OneLine(in)
		if got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
		info := validInfo()
		info.Skills = []registry.SkillInfo{{Name: "s", Description: got}}
		if err := info.Validate(); err != nil {
			t.Errorf("OneLine(%q) = %q: Validate = %v", in, got, err)
		}
	}
}
