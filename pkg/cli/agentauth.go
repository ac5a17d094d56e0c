package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/textproto"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/mcpinspect"
)

// maxHeaderFileBytes bounds an --mcp-header-file.
const maxHeaderFileBytes = 64 << 10

// mcpHeaderOptions are --mcp-header and --mcp-header-file, which the agent
// and register --from-mcp share: headers sent to an HTTP MCP server.
type mcpHeaderOptions struct {
	Flags []string
	File  string
}

// addFlags defines the flags on fl.
func (o *mcpHeaderOptions) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&o.Flags, "mcp-header", nil, "'Name: value' header sent to an HTTP MCP server (repeatable)")
	fl.StringVar(&o.File, "mcp-header-file", "", "file of 'Name: value' headers, one a line, sent to an HTTP MCP server")
	_ = cmd.MarkFlagFilename("mcp-header-file")
}

// header reads the flags for target; headers are for an HTTP server only,
// named by the flag httpFlag.
func (o *mcpHeaderOptions) header(target mcpinspect.Target, httpFlag, stdioFlag string) (http.Header, error) {
	h, err := mcpHeaders(o.Flags, o.File)
	if err != nil {
		return nil, err
	}
	if len(h) > 0 && target.Stdio() {
		return nil, usagef("--mcp-header and --mcp-header-file are for an HTTP server (--%s), not --%s", httpFlag, stdioFlag)
	}
	return h, nil
}

// given reports whether either flag was given.
func (o *mcpHeaderOptions) given() bool { return len(o.Flags) > 0 || o.File != "" }

// refusedHint adds to err, the failure of talking to an HTTP MCP server
// through tr, the hint to check --mcp-header when the server answered 401
// or 403.
func refusedHint(err error, tr *mcpinspect.HeaderTransport) error {
	if err == nil || tr == nil || tr.Denied() == 0 {
		return err
	}
	return fmt.Errorf("%w (the MCP server refuses the credentials, 401/403: check --mcp-header)", err)
}

// mcpHeaders returns the headers of the --mcp-header flags and the lines of
// the --mcp-header-file (blank lines and lines starting with # skipped),
// each "Name: value".
func mcpHeaders(flags []string, file string) (http.Header, error) {
	h := http.Header{}
	add := func(where, line string) error {
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !validHeaderName(name) {
			return usagef("invalid %s %q: want 'Name: value'", where, line)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return usagef("invalid %s %s: a control character in the value", where, name)
		}
		h.Add(textproto.CanonicalMIMEHeaderKey(name), value)
		return nil
	}
	for _, f := range flags {
		if err := add("--mcp-header", f); err != nil {
			return nil, err
		}
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usagef("--mcp-header-file: %v", err)
		}
		if len(b) > maxHeaderFileBytes {
			return nil, usagef("--mcp-header-file %s: larger than %d bytes", file, maxHeaderFileBytes)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			// The line is not quoted back: it may hold a secret.
			if name, _, ok := strings.Cut(line, ":"); !ok || !validHeaderName(strings.TrimSpace(name)) {
				return nil, usagef("--mcp-header-file %s: line %d is not 'Name: value'", file, n)
			}
			if err := add(fmt.Sprintf("--mcp-header-file %s line %d", file, n), line); err != nil {
				return nil, err
			}
		}
	}
	return h, nil
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}
