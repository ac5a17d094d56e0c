package output

import (
	"fmt"
	"strings"
)

// Format is how a command prints its result (the -o/--output flag).
type Format string

// The output formats mcpctl understands.
const (
	Table Format = "table"
	Wide  Format = "wide"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// Formats lists every format, in the order the help text names them.
var Formats = []Format{Table, Wide, JSON, YAML}

// ParseFormat returns the format named s, or an error naming the valid ones.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("invalid output format %q: want one of %s", s, FormatNames())
}

// FormatNames returns the valid formats joined for a message: "table|wide|json|yaml".
func FormatNames() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return strings.Join(names, "|")
}

// Structured reports whether f prints objects (json, yaml) rather than text.
func (f Format) Structured() bool { return f == JSON || f == YAML }
