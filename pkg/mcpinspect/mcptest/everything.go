package mcptest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The reference server the end-to-end tests run, pinned so that what they
// check stays true.
const (
	EverythingPackage = "@modelcontextprotocol/server-everything"
	EverythingVersion = "2026.8.31"
	// everythingInstallTimeout bounds npm install.
	everythingInstallTimeout = 3 * time.Minute
)

// ServerEverything returns the command that runs the reference MCP server
// @modelcontextprotocol/server-everything over stdio, installing it with
// npm into a cache directory the first time (later runs reuse it). Without
// node and npm, or when the install fails, the test fails under CI=true
// and is skipped elsewhere, saying why.
func ServerEverything(t testing.TB) []string {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: this end-to-end test must run; install Node.js and npm, and let npm reach its registry)", msg)
		}
		t.Skipf("%s: skipping the end-to-end test with %s (install Node.js and npm to run it)", msg, EverythingPackage)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable("node not found on PATH")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		unavailable("npm not found on PATH")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "mcpd-test")
	dir := filepath.Join(root, "server-everything@"+EverythingVersion)
	entry := filepath.Join(dir, "node_modules", filepath.FromSlash(EverythingPackage), "dist", "index.js")
	if _, err := os.Stat(entry); err == nil {
		return []string{node, entry, "stdio"}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		unavailable("cache directory: %v", err)
	}
	// Install beside the final place and rename, so that a concurrent test
	// process never sees half an install.
	tmp, err := os.MkdirTemp(root, ".install-")
	if err != nil {
		unavailable("cache directory: %v", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), everythingInstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error",
		EverythingPackage+"@"+EverythingVersion)
	out, err := cmd.CombinedOutput()
	if err != nil {
		unavailable("npm install %s@%s: %v: %s", EverythingPackage, EverythingVersion, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(entry); serr != nil { // not another process's install
			unavailable("install into %s: %v", dir, err)
		}
	}
	if _, err := os.Stat(entry); err != nil {
		unavailable("%s has no %s after npm install", EverythingPackage, entry)
	}
	return []string{node, entry, "stdio"}
}
