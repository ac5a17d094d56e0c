package mcpinspect

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Target says how to reach an MCP server: exactly one of URL (streamable
// HTTP) or Command (stdio).
type Target struct {
	// URL is the server's streamable HTTP endpoint (http or https).
	URL string
	// HTTPClient sends the HTTP requests; nil: a client without a timeout
	// (calls are bounded by their contexts).
	HTTPClient *http.Client

	// Command is the program and arguments of a stdio server, started
	// without a shell (see ParseCommand).
	Command []string
	// Env is added to this process's environment for Command (KEY=VALUE).
	Env []string
	// Dir is Command's working directory; empty: this process's.
	Dir string
	// Stderr receives a copy of Command's standard error; nil: none. The
	// last few KiB are kept in any case and quoted when connecting fails.
	Stderr io.Writer
}

// Errors of a Target.
var (
	ErrNoTarget      = errors.New("no MCP server: want a URL or a command")
	ErrTwoTargets    = errors.New("both a URL and a command: want one")
	errEmptyCommand  = errors.New("empty command")
	errUnclosedQuote = errors.New("unterminated quote")
)

// Stdio reports whether the target is a command spoken to over stdio.
func (t Target) Stdio() bool { return len(t.Command) > 0 }

// Validate checks that exactly one of URL and Command is set and that the
// URL is an absolute http or https URL.
func (t Target) Validate() error {
	switch {
	case t.URL == "" && len(t.Command) == 0:
		return ErrNoTarget
	case t.URL != "" && len(t.Command) > 0:
		return ErrTwoTargets
	case len(t.Command) > 0:
		if strings.TrimSpace(t.Command[0]) == "" {
			return errEmptyCommand
		}
		return nil
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		return fmt.Errorf("mcp url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("mcp url %q: want http:// or https:// and a host", t.URL)
	}
	return nil
}

// String names the target for logs and messages: the URL without its user
// information, or the command line.
func (t Target) String() string {
	if len(t.Command) > 0 {
		return strings.Join(t.Command, " ")
	}
	if u, err := url.Parse(t.URL); err == nil {
		u.User = nil
		return u.String()
	}
	return t.URL
}

// ParseCommand splits a command line into words the way a POSIX shell
// would, without running one: words are separated by blanks; single quotes
// keep everything literally; double quotes keep everything but \" \\ \$ \`
// and a backslash-newline; a backslash outside quotes escapes the next
// character. Nothing is expanded: no variables, globs, tildes, pipes or
// redirections ($HOME, *, |, > are plain characters).
func ParseCommand(s string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch r {
		case ' ', '\t', '\n', '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\\':
			inWord = true
			if i+1 >= len(rs) {
				cur.WriteRune(r) // a trailing backslash stays
				continue
			}
			i++
			if rs[i] != '\n' { // backslash-newline joins lines
				cur.WriteRune(rs[i])
			}
		case '\'':
			inWord = true
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("command %q: %w", s, errUnclosedQuote)
			}
			cur.WriteString(string(rs[i+1 : j]))
			i = j
		case '"':
			inWord = true
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) {
					switch rs[j+1] {
					case '"', '\\', '$', '`':
						cur.WriteRune(rs[j+1])
						j++
						continue
					case '\n':
						j++
						continue
					}
				}
				cur.WriteRune(rs[j])
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("command %q: %w", s, errUnclosedQuote)
			}
			i = j
		default:
			inWord = true
			cur.WriteRune(r)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errEmptyCommand
	}
	return words, nil
}
