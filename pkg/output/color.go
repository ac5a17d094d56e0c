package output

import "github.com/cyberos/mcpd/pkg/registry"

// ANSI SGR sequences used for statuses.
const (
	ansiReset  = "\x1b[0m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiRed    = "\x1b[31m"
	ansiFaint  = "\x1b[2m"
)

// ColorEnabled reports whether output to a stream may be coloured: only on a
// terminal, and never when the NO_COLOR environment variable is set to a
// non-empty value (https://no-color.org). getenv is os.Getenv in production.
func ColorEnabled(terminal bool, getenv func(string) string) bool {
	if !terminal {
		return false
	}
	return getenv == nil || getenv("NO_COLOR") == ""
}

// statusColor returns the SGR sequence for a status, "" for none.
func statusColor(s registry.Status) string {
	switch s {
	case registry.StatusHealthy:
		return ansiGreen
	case registry.StatusDegraded:
		return ansiYellow
	case registry.StatusUnhealthy:
		return ansiRed
	case registry.StatusDeregistered:
		return ansiFaint
	}
	return ""
}

func paint(color, s string) string {
	if color == "" || s == "" {
		return s
	}
	return color + s + ansiReset
}
