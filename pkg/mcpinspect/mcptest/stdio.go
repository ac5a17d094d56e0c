package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeArg is the first argument that makes a test binary an MCP server
// over stdio (see ServeIfAsked).
const ServeArg = "mcptest-serve"

// controlPoll is how often a stdio server reads its control file.
const controlPoll = 10 * time.Millisecond

// Files of a stdio server's control directory.
const (
	controlFile = "control.json" // the Config, rewritten by the test
	pidFile     = "pid"          // the running server's process id
	startsFile  = "starts"       // a line per start
)

// ServeIfAsked makes this process a stdio MCP server, and exits, when it was
// started as one (by a Stdio's Command); otherwise it returns at once. Call
// it first in TestMain.
//
// In the test process it also sets GORACE=atexit_sleep_ms=0 (unless GORACE
// is set) for the children it starts: a binary built with -race otherwise
// sleeps a second before it exits, which every stop of a server would wait.
func ServeIfAsked() {
	if len(os.Args) < 3 || os.Args[1] != ServeArg {
		if _, ok := os.LookupEnv("GORACE"); !ok {
			_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
		}
		return
	}
	if err := serveStdio(os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveStdio(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, controlFile))
	if err != nil {
		return err
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	s := NewServer(cfg)
	if err := writeAtomic(filepath.Join(dir, pidFile), []byte(strconv.Itoa(os.Getpid()))); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, startsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintln(f, os.Getpid())
	f.Close()
	if cfg.ExitAtStart != 0 {
		fmt.Fprintln(os.Stderr, "mcptest: exiting at start as told")
		os.Exit(cfg.ExitAtStart)
	}
	fmt.Fprintln(os.Stderr, "mcptest: serving", cfg.Name, cfg.Version, "on stdio")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		t := time.NewTicker(controlPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			b, err := os.ReadFile(filepath.Join(dir, controlFile))
			if err != nil || bytes.Equal(b, raw) {
				continue
			}
			raw = b
			var c Config
			if json.Unmarshal(b, &c) != nil {
				continue
			}
			s.SetPing(c.Ping)
			s.SetTools(c.Tools...)
		}
	}()
	err = s.MCP.Run(ctx, &mcp.StdioTransport{})
	s.Close()
	return err
}

// Stdio is a test MCP server that runs as a child process of whoever
// starts Command, controlled through files in a directory.
type Stdio struct {
	// Command starts the server: this test binary, ServeArg and the
	// control directory.
	Command []string
	dir     string
	cfg     Config
}

// NewStdio prepares a stdio server as cfg says; nothing runs until Command
// is started.
func NewStdio(t testing.TB, cfg Config) *Stdio {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &Stdio{dir: t.TempDir(), cfg: cfg}
	s.Command = []string{exe, ServeArg, s.dir}
	s.write(t)
	return s
}

// CommandLine is Command as one line, for --mcp-command (the paths of test
// binaries and temporary directories hold no blanks or quotes).
func (s *Stdio) CommandLine() string { return strings.Join(s.Command, " ") }

func (s *Stdio) write(t testing.TB) {
	t.Helper()
	b, err := json.Marshal(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(filepath.Join(s.dir, controlFile), b); err != nil {
		t.Fatal(err)
	}
}

// Update changes the configuration: ping mode and tools apply to a running
// server within milliseconds; name, version and protocols from its next
// start.
func (s *Stdio) Update(t testing.TB, change func(*Config)) {
	t.Helper()
	change(&s.cfg)
	s.write(t)
}

// SetPing sets how liveness requests are answered.
func (s *Stdio) SetPing(t testing.TB, m PingMode) { s.Update(t, func(c *Config) { c.Ping = m }) }

// SetTools sets the whole tool list.
func (s *Stdio) SetTools(t testing.TB, tools ...Tool) {
	s.Update(t, func(c *Config) { c.Tools = tools })
}

// PID returns the process id of the server started last; 0 before a start.
func (s *Stdio) PID() int {
	b, err := os.ReadFile(filepath.Join(s.dir, pidFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// Starts counts the times the server was started.
func (s *Stdio) Starts() int {
	b, err := os.ReadFile(filepath.Join(s.dir, startsFile))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// Kill kills the server started last with SIGKILL.
func (s *Stdio) Kill(t testing.TB) {
	t.Helper()
	pid := s.PID()
	if pid == 0 {
		t.Fatal("mcptest: no stdio server to kill")
	}
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		t.Fatalf("mcptest: kill %d: %v", pid, err)
	}
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
