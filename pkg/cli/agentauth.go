package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/textproto"
	"os"
	"strings"
)

// maxHeaderFileBytes bounds an --mcp-header-file.
const maxHeaderFileBytes = 64 << 10

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
