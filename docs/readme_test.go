package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeSection returns the text of the README's "## title" section.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// codeBlocks returns the fenced code blocks of markdown text.
func codeBlocks(text string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestReadmeInstallSaysWhatWorks: the Install section gives as commands to
// run only what works before a release (a clone, make build); go install
// …@latest, which failed for every reader, is said to come with a release,
// never given as a command.
func TestReadmeInstallSaysWhatWorks(t *testing.T) {
	t.Parallel()
	install := readmeSection(t, "Install")
	blocks := strings.Join(codeBlocks(install), "\n")
	for _, want := range []string{"git clone", "make build"} {
		if !strings.Contains(blocks, want) {
			t.Errorf("the Install section's commands do not include %q", want)
		}
	}
	for _, bad := range []string{"go install", "@latest", "ghcr.io", "docker pull"} {
		if strings.Contains(blocks, bad) {
			t.Errorf("the Install section gives %q as a command; it works only once a release is published", bad)
		}
	}
	if !strings.Contains(install, "release-snapshot") || !regexp.MustCompile(`(?i)no release has been published`).MatchString(install) {
		t.Error("the Install section does not say that no release is published yet and how to build one (make release-snapshot)")
	}
}

// TestReadmeBootstrapIsTested: every statement of the README's production
// bootstrap (the database, its CREATEROLE owner, mcpd's login role and its
// grant) is one that cmd/mcpctl TestBootstrapWithCreateRoleOwner runs.
func TestReadmeBootstrapIsTested(t *testing.T) {
	t.Parallel()
	db := readmeSection(t, "Production database")
	test, err := os.ReadFile(filepath.Join("..", "cmd", "mcpctl", "bootstrap_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	stmts := regexp.MustCompile(`-c '([^']+)'`).FindAllStringSubmatch(strings.Join(codeBlocks(db), "\n"), -1)
	if len(stmts) < 4 {
		t.Fatalf("the Production database section has %d SQL statements, want the database, its owner, mcpd's role and its grant", len(stmts))
	}
	var all []string
	for _, m := range stmts {
		all = append(all, m[1])
		if !strings.Contains(string(test), "`"+m[1]+"`") {
			t.Errorf("README's %q is not run by TestBootstrapWithCreateRoleOwner", m[1])
		}
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"CREATE ROLE mcpd_owner LOGIN CREATEROLE", "CREATE DATABASE mcpd OWNER mcpd_owner", "GRANT cyberos_app TO mcpd"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the Production database section lacks %q", want)
		}
	}
}

// TestAlertmanagerIsMentioned: a reader who loads the shipped rules learns,
// from the README and from the rules file's header, that "server died"
// alerts come from mcpd itself (--alertmanager-url, docs/alerts.md), not
// from the rules.
func TestAlertmanagerIsMentioned(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join("prometheus", "mcpd-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(string(rules), "\ngroups:")
	for name, text := range map[string]string{"README.md": string(readme), "the header of mcpd-rules.yml": header} {
		for _, want := range []string{"--alertmanager-url", "alerts.md", "MCPServerUnhealthy", "runbook"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not mention %s", name, want)
			}
		}
	}
}
