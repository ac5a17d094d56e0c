package output

import (
	"fmt"
	"time"
)

// Age says how long before now t was, as people read it: "just now",
// "12s ago", "3m ago", "2h ago", "5d ago"; "never" for the zero time. A t
// after now (clock skew) is "just now".
func Age(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int64(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int64(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh ago", int64(d/time.Hour))
	default:
		return fmt.Sprintf("%dd ago", int64(d/(24*time.Hour)))
	}
}

// Timestamp is t as scripts read it: RFC 3339 in UTC, "" for the zero time.
func Timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
