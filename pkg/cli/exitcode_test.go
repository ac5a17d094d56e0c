package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestExitCodesEveryCommand: bad usage (bad flags or arguments, a malformed
// URL, a file a flag names that is missing or cannot be read) is exit 2
// whichever command it is, with a message about that input; a call that
// fails (the server or the database unreachable) is exit 1, with a hint
// about the right server. Found by a black-box attack: a missing file was
// exit 2 for register and exit 1 for token issue, migrate status
// --database-url "not a url" was exit 1, and migrate against an unreachable
// database said to check mcpd's --server.
func TestExitCodesEveryCommand(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	secret := writeFile(t, "jwt.secret", string(testSecret(t)))
	caps := writeFile(t, "caps.json", `{"tools":{}}`)
	mcpd := "http://" + closedAddr(t)
	pg := closedAddr(t)
	tenant := uuid.NewString()
	reg := []string{"register", "--server", mcpd, "--token", "t", "--module", "calendar", "--version", "1.0.0", "--protocol", "2025-06-18"}
	tok := []string{"token", "issue", "--tenant", tenant, "--scope", "mcp:read"}
	sim := []string{"heartbeat-simulate", "--server", mcpd, "--token", "t", "--servers", "1", "--duration", "1s"}

	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		// The error line must hold each of these; the hint line (after
		// it) must hold hint, or be absent when hint is "".
		want []string
		hint string
	}{
		{"register capabilities missing", nil, append(reg, "--capabilities", missing), 2, []string{"--capabilities", missing, "no such file"}, ""},
		{"register capabilities a directory", nil, append(reg, "--capabilities", dir), 2, []string{"--capabilities", dir, "is a directory"}, ""},
		{"register capabilities not json", nil, append(reg, "--capabilities", secret), 2, []string{"capabilities", "not a JSON object"}, ""},
		{"token secret missing", nil, append(tok, "--secret-file", missing), 2, []string{"--secret-file", missing, "no such file"}, ""},
		{"token secret a directory", nil, append(tok, "--secret-file", dir), 2, []string{"--secret-file", dir, "is a directory"}, ""},
		{"token secret short", nil, append(tok, "--secret-file", writeFile(t, "short", "abc\n")), 2, []string{"--secret-file", "3 bytes", "at least 32"}, ""},
		{"simulate scenario missing", nil, append(sim, "--scenario", missing), 2, []string{"--scenario", missing, "no such file"}, ""},
		{"simulate scenario invalid", nil, append(sim, "--scenario", caps), 2, []string{"--scenario", caps, "invalid scenario"}, ""},
		{"simulate scenario past the run", nil, append(sim, "--scenario", writeFile(t, "late.yaml", "events:\n  - at: 1m\n    action: stop\n    servers: [0]\n")), 2,
			[]string{"invalid scenario", "not before the end of the run"}, ""},
		{"config flag missing", nil, []string{"--config", missing, "servers", "list"}, 2, []string{"--config", missing, "no such file"}, ""},
		{"config env missing", map[string]string{EnvConfig: missing}, []string{"servers", "list"}, 2, []string{missing, "no such file"}, ""},
		{"config a directory", nil, []string{"--config", dir, "servers", "list"}, 2, []string{"--config", dir, "is a directory"}, ""},
		{"migrate url with spaces", nil, []string{"migrate", "status", "--database-url", "not a url"}, 2, []string{"invalid database URL", "--database-url"}, ""},
		{"migrate url a word", nil, []string{"migrate", "up", "--database-url", "localhost"}, 2, []string{"invalid database URL"}, ""},
		{"migrate url other scheme", nil, []string{"migrate", "down", "1", "--database-url", "mysql://u@127.0.0.1/db"}, 2, []string{"invalid database URL"}, ""},
		{"migrate url bad port", nil, []string{"migrate", "status", "--database-url", "postgres://u@127.0.0.1:port/db"}, 2, []string{"invalid database URL"}, ""},
		{"migrate url from env", map[string]string{EnvDatabaseURL: "host=127.0.0.1 port=x"}, []string{"migrate", "status"}, 2, []string{"invalid database URL", EnvDatabaseURL}, ""},
		{"migrate url missing", nil, []string{"migrate", "status"}, 2, []string{"no database URL", "--database-url"}, ""},

		{"migrate database unreachable", nil, []string{"migrate", "status", "--database-url", "postgres://owner@" + pg + "/mcpd?connect_timeout=5"}, 1,
			[]string{"migrate status", "connect"}, "Is PostgreSQL running at " + pg + "? Check --database-url or " + EnvDatabaseURL + "."},
		{"migrate up database unreachable dsn", nil, []string{"migrate", "up", "--database-url", "host=127.0.0.1 port=" + pg[strings.LastIndex(pg, ":")+1:] + " user=owner connect_timeout=5"}, 1,
			[]string{"migrate up", "connect"}, "Is PostgreSQL running at " + pg + "?"},
		{"register mcpd unreachable", nil, reg, 1, []string{"connection refused"}, "Is mcpd running at " + mcpd + "? Set --server or " + EnvServer + "."},
		{"register with capabilities, mcpd unreachable", nil, append(reg, "--capabilities", caps), 1, []string{"connection refused"}, "Is mcpd running at " + mcpd + "?"},
		{"list mcpd unreachable", nil, []string{"servers", "list", "--server", mcpd, "--token", "t"}, 1, []string{"connection refused"}, "Is mcpd running at " + mcpd + "?"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, out, errOut := mainRun(t, c.args...)
			if code != c.code || out != "" {
				t.Fatalf("%q: exit %d stdout %q stderr %q; want exit %d", c.args, code, out, errOut, c.code)
			}
			first, rest, _ := strings.Cut(errOut, "\n")
			if !strings.HasPrefix(first, "Error: ") {
				t.Fatalf("stderr %q: want an Error: line first", errOut)
			}
			// The error of a failed connection may span several lines.
			msg := errOut
			if c.hint != "" {
				msg, _, _ = strings.Cut(errOut, "Is ")
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("stderr %q: want %q in the error", errOut, w)
				}
			}
			switch {
			case c.code == 2 && !strings.Contains(rest, "--help' for usage."):
				t.Fatalf("stderr %q: want the usage hint", errOut)
			case c.code == 1 && strings.Contains(errOut, "for usage"):
				t.Fatalf("stderr %q: a failed call with a usage hint", errOut)
			case c.hint == "" && strings.Contains(errOut, "Is "):
				t.Fatalf("stderr %q: a hint about a server", errOut)
			case c.hint != "" && !strings.Contains(errOut, c.hint):
				t.Fatalf("stderr %q: want the hint %q", errOut, c.hint)
			}
			if strings.Contains(errOut, "mcpd running") && strings.HasPrefix(c.args[0], "migrate") {
				t.Fatalf("stderr %q: migrate points at mcpd", errOut)
			}
		})
	}
	if os.Geteuid() != 0 {
		unreadable := writeFile(t, "unreadable.json", "{}")
		if err := os.Chmod(unreadable, 0); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := mainRun(t, append(reg, "--capabilities", unreadable)...)
		if code != 2 || !strings.Contains(errOut, "permission denied") {
			t.Fatalf("unreadable capabilities: exit %d stderr %q", code, errOut)
		}
	}
}
