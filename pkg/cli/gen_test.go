package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The generated files are committed; these tests fail when they are stale.
// `make completions docs` writes them again.

func TestCompletionsUpToDate(t *testing.T) {
	t.Parallel()
	for shell, name := range CompletionFileNames {
		var buf bytes.Buffer
		if err := GenCompletion(&buf, shell); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(buf.Bytes(), []byte("mcpctl")) {
			t.Fatalf("%s completion does not name mcpctl", shell)
		}
		committed, err := os.ReadFile(filepath.Join("..", "..", "completions", name))
		if err != nil {
			t.Fatalf("%s: %v (run make completions)", name, err)
		}
		if !bytes.Equal(committed, buf.Bytes()) {
			t.Errorf("completions/%s is stale: run make completions", name)
		}
	}
}

func TestDocsUpToDate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dir string
		gen func(string) error
	}{
		{filepath.Join("..", "..", "docs", "cli"), GenMarkdown},
		{filepath.Join("..", "..", "docs", "man"), GenMan},
	} {
		tmp := t.TempDir()
		if err := c.gen(tmp); err != nil {
			t.Fatal(err)
		}
		want := readTree(t, tmp)
		got := readTree(t, c.dir)
		if len(want) == 0 {
			t.Fatalf("%s: nothing generated", c.dir)
		}
		for name, content := range want {
			if committed, ok := got[name]; !ok {
				t.Errorf("%s/%s is missing: run make docs", c.dir, name)
			} else if committed != content {
				t.Errorf("%s/%s is stale: run make docs", c.dir, name)
			}
		}
		for name := range got {
			// docs/man also holds mcpd.1, which pkg/daemon's tests check.
			if _, ok := want[name]; !ok && strings.HasPrefix(name, "mcpctl") {
				t.Errorf("%s/%s is no longer generated: run make docs", c.dir, name)
			}
		}
	}
}

func TestDocsCoverEveryCommand(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	if err := GenMarkdown(tmp); err != nil {
		t.Fatal(err)
	}
	pages := readTree(t, tmp)
	var names []string
	for name := range pages {
		names = append(names, strings.TrimSuffix(name, ".md"))
	}
	for _, want := range []string{
		"mcpctl", "mcpctl_register", "mcpctl_heartbeat", "mcpctl_deregister", "mcpctl_list",
		"mcpctl_servers_list", "mcpctl_servers_get", "mcpctl_servers_skills", "mcpctl_audit_list",
		"mcpctl_migrate_up", "mcpctl_migrate_down", "mcpctl_migrate_status", "mcpctl_migrate_version",
		"mcpctl_heartbeat-simulate", "mcpctl_watch", "mcpctl_token_issue", "mcpctl_completion", "mcpctl_version",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("no reference page %s.md (have %v)", want, names)
		}
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%v (run make docs)", err)
	}
	files := map[string]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}
