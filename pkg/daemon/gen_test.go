package daemon_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/daemon"
)

// docs/man/mcpd.1 is generated from the command (make docs) and committed.
func TestManPageUpToDate(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	if err := daemon.GenMan(tmp); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "mcpd.1" {
		t.Fatalf("generated %v, want mcpd.1 alone", entries)
	}
	want, err := os.ReadFile(filepath.Join(tmp, "mcpd.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"--database-url", "--auth-jwt-secret-file", "MCPD_<FLAG>", ".SH EXAMPLE"} {
		if !strings.Contains(string(want), s) {
			t.Errorf("the man page lacks %q", s)
		}
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "man", "mcpd.1"))
	if err != nil {
		t.Fatalf("%v (run make docs)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/man/mcpd.1 is stale: run make docs")
	}
}
