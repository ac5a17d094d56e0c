package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDevBannerMcpctlCommand: the --dev banner prints the mcpctl lines as
// they run where mcpd was started. It printed "mcpctl …" to a README reader
// who ran go run ./cmd/mcpd in a clone, without mcpctl on the PATH.
func TestDevBannerMcpctlCommand(t *testing.T) {
	t.Parallel()
	clone := t.TempDir()
	if err := os.MkdirAll(filepath.Join(clone, "cmd", "mcpctl"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(clone, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "mcpctl"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	onPath := func(string) (string, error) { return "/usr/local/bin/mcpctl", nil }
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }
	goRun := "/tmp/go-build1234/b001/exe/mcpd"
	for _, c := range []struct {
		name, exe, dir string
		lookPath       func(string) (string, error)
		want           string
	}{
		{"go run in a clone", goRun, clone, notOnPath, "go run ./cmd/mcpctl"},
		{"go run in a clone, mcpctl installed too", goRun, clone, onPath, "go run ./cmd/mcpctl"},
		{"make build's binary, from the clone", filepath.Join(bin, "mcpd"), clone, notOnPath, "./bin/mcpctl"},
		{"make build's binary, from elsewhere", filepath.Join(bin, "mcpd"), elsewhere, notOnPath, filepath.Join(bin, "mcpctl")},
		{"installed", "/usr/bin/mcpd", elsewhere, onPath, "mcpctl"},
		{"installed, run in a clone", "/usr/bin/mcpd", clone, onPath, "mcpctl"},
		{"mcpd alone, in a clone", "/opt/mcpd", clone, notOnPath, "go run ./cmd/mcpctl"},
		{"mcpd alone", "/opt/mcpd", elsewhere, notOnPath, "mcpctl"},
	} {
		if got := mcpctlCommand(c.exe, c.dir, c.lookPath); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}

	// The banner prints it on every mcpctl line.
	b := &devBanner{secretFile: "/tmp/s.key", token: "T", expires: time.Now(), mcpctl: "go run ./cmd/mcpctl"}
	var out strings.Builder
	b.print(&out, "http://127.0.0.1:8420")
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "mcpctl" {
			t.Errorf("a bare mcpctl line: %q", line)
		}
	}
	if n := strings.Count(out.String(), "  go run ./cmd/mcpctl "); n != 4 {
		t.Errorf("%d lines of go run ./cmd/mcpctl, want 4:\n%s", n, out.String())
	}
}
