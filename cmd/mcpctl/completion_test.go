package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestBashCompletionWithoutBashCompletionPackage: the bash completion
// script works in a bare bash, without the bash-completion package's
// functions: every Tab failed with "_get_comp_words_by_ref: command not
// found" there.
func TestBashCompletionWithoutBashCompletionPackage(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		pgtest.Missing(t, "bash not found: apt-get install bash")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "completions", "mcpctl.bash"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"ser"}, "servers"},
		{[]string{"servers", "l"}, "list"},
		{[]string{"servers", "list", "--sta"}, "--status"},
		{[]string{"register", "--capabilities", filepath.Join(dir, "ca")}, filepath.Join(dir, "caps.json")},
	} {
		if err := os.WriteFile(filepath.Join(dir, "caps.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		// A bash without rc files: none of bash-completion's functions.
		prog := `source "$SCRIPT"
declare -F _get_comp_words_by_ref _init_completion _filedir && echo "bash-completion is loaded" >&2
COMP_WORDS=("$BIN" ` + quoteAll(c.words) + `)
COMP_CWORD=$((${#COMP_WORDS[@]}-1))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
__start_mcpctl
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
		cmd.Env = []string{envRunMain + "=1", "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"),
			"SCRIPT=" + script, "BIN=" + os.Args[0]}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		// compopt complains when called outside a completion, as here.
		stderr := strings.TrimSpace(regexp.MustCompile(`(?m)^.*compopt: not currently executing completion function\n`).
			ReplaceAllString(errOut.String(), ""))
		if err != nil || stderr != "" {
			t.Fatalf("%v: %v, stderr:\n%s", c.words, err, stderr)
		}
		got := strings.Fields(out.String())
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, c.want)
		}
		if !found {
			t.Fatalf("%v: completions %q, want %q among them", c.words, got, c.want)
		}
	}
}

func quoteAll(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
