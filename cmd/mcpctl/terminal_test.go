package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestNoTerminalQuery: mcpctl never asks the terminal for its background
// colour or cursor position, NO_COLOR or not. Under script(1) or a CI log,
// where nothing answers, `servers list` printed "\x1b]11;?\x1b\\\x1b[6n"
// and waited 5 s for an answer (bubbletea's init asks, through lipgloss,
// before main runs).
func TestNoTerminalQuery(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	if err != nil {
		pgtest.Missing(t, "script(1) not found: apt-get install bsdutils (util-linux)")
	}
	for _, env := range [][]string{{"TERM=xterm-256color"}, {"TERM=xterm-256color", "NO_COLOR=1"}} {
		// script gives the command a terminal whose other side never answers.
		cmd := exec.Command(script, "-qec", os.Args[0]+" servers list --server http://127.0.0.1:1 --token x", "/dev/null")
		cmd.Env = append([]string{envRunMain + "=1", "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		_ = cmd.Run() // exit 1: nothing listens there
		for _, query := range []string{"\x1b]11;?", "\x1b[6n"} {
			if strings.Contains(out.String(), query) {
				t.Fatalf("%v: mcpctl queried the terminal (%q):\n%q", env, query, out.String())
			}
		}
		if !strings.Contains(out.String(), "list servers") {
			t.Fatalf("%v: not the failed call's message:\n%q", env, out.String())
		}
	}
}
