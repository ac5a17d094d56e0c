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
	node, dir := NpmPackage(t, EverythingPackage, EverythingVersion)
	entry := filepath.Join(dir, "node_modules", filepath.FromSlash(EverythingPackage), "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		npmUnavailable(t, EverythingPackage, "%s has no %s after npm install", EverythingPackage, entry)
	}
	return []string{node, entry, "stdio"}
}

// NpmPackage installs the npm package pkg at version with npm into a cache
// directory the first time (later runs reuse it) and returns the path of
// node and the directory whose node_modules holds the package. Without
// node and npm, or when the install fails, the test fails under CI=true
// and is skipped elsewhere, saying why.
func NpmPackage(t testing.TB, pkg, version string) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		npmUnavailable(t, pkg, "node not found on PATH")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		npmUnavailable(t, pkg, "npm not found on PATH")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "mcpd-test")
	dir = filepath.Join(root, filepath.Base(pkg)+"@"+version)
	installed := filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json")
	if _, err := os.Stat(installed); err == nil {
		return node, dir
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		npmUnavailable(t, pkg, "cache directory: %v", err)
	}
	// Install beside the final place and rename, so that a concurrent test
	// process never sees half an install.
	tmp, err := os.MkdirTemp(root, ".install-")
	if err != nil {
		npmUnavailable(t, pkg, "cache directory: %v", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), everythingInstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error",
		pkg+"@"+version)
	out, err := cmd.CombinedOutput()
	if err != nil {
		npmUnavailable(t, pkg, "npm install %s@%s: %v: %s", pkg, version, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(installed); serr != nil { // not another process's install
			npmUnavailable(t, pkg, "install into %s: %v", dir, err)
		}
	}
	if _, err := os.Stat(installed); err != nil {
		npmUnavailable(t, pkg, "%s is not in %s after npm install", pkg, dir)
	}
	return node, dir
}

// npmUnavailable fails the test under CI=true and skips it elsewhere.
func npmUnavailable(t testing.TB, pkg, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: this end-to-end test must run; install Node.js and npm, and let npm reach its registry)", msg)
	}
	t.Skipf("%s: skipping the end-to-end test with %s (install Node.js and npm to run it)", msg, pkg)
}
