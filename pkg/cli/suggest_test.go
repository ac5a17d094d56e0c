package cli

import (
	"strings"
	"testing"
)

// TestSubcommandSuggestions: a mistyped subcommand gets "did you mean",
// as a mistyped top-level command does (`mcpctl servers lst` got none).
func TestSubcommandSuggestions(t *testing.T) {
	isolate(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"servers", "lst"}, "list"},
		{[]string{"servers", "gte"}, "get"},
		{[]string{"skills", "lsit"}, "list"},
		{[]string{"audit", "wach"}, "watch"},
		{[]string{"migrate", "staus"}, "status"},
		{[]string{"token", "isue"}, "issue"},
		{[]string{"sevrers"}, "servers"},
	} {
		code, _, errOut := mainRun(t, c.args...)
		if code != 2 || !strings.Contains(errOut, "Did you mean this?\n\t"+c.want+"\n") {
			t.Fatalf("%v: exit %d stderr %q, want 2 and a suggestion of %q", c.args, code, errOut, c.want)
		}
	}
	if code, _, errOut := mainRun(t, "servers", "zzzzzz"); code != 2 || strings.Contains(errOut, "Did you mean") {
		t.Fatalf("servers zzzzzz: exit %d stderr %q, want 2 and no suggestion", code, errOut)
	}
}
