package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/cyberos/mcpd/pkg/registry"
)

// age says how long ago t was, at second precision: "7s ago", "3m05s ago",
// "2h04m ago", "3d02h ago"; a zero t is "never".
func age(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds ago", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds ago", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm ago", s/3600, (s%3600)/60)
	default:
		return fmt.Sprintf("%dd%02dh ago", s/86400, (s%86400)/3600)
	}
}

// heartbeatAge is the age of a server's last heartbeat. The feed carries
// transitions, not heartbeats, so the board knows the time of the last
// heartbeat only from the last list or a recovery: exact while a server is
// not healthy (a heartbeat would have recovered it), an upper bound while
// it is. A healthy server's last heartbeat is less than two intervals old
// (else the monitor would have said degraded), so past that it shows
// "<20s ago".
func heartbeatAge(now time.Time, e *entry) string {
	if e.Status == registry.StatusHealthy && e.HeartbeatIntervalSecs > 0 {
		bound := time.Duration(2 * e.HeartbeatIntervalSecs * float64(time.Second))
		if now.Sub(e.LastHeartbeatAt) >= bound {
			return "<" + age(now, now.Add(-bound))
		}
	}
	return age(now, e.LastHeartbeatAt)
}

// changed is the age of a transition, "-" before the feed told of one.
func changed(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return age(now, t)
}

// fit cuts s (which may carry ANSI styles) to width cells with an ellipsis
// and pads it with spaces to exactly width.
func fit(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > width {
		s = ansi.Truncate(s, width, "…")
	}
	if pad := width - ansi.StringWidth(s); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// spread puts left and right on one line of width cells, right-aligned
// right; when both do not fit, left wins.
func spread(left, right string, width int) string {
	gap := width - ansi.StringWidth(left) - ansi.StringWidth(right)
	if gap < 1 {
		return fit(left, width)
	}
	return left + strings.Repeat(" ", gap) + right
}

// ceilSeconds is d rounded up to whole seconds, at least 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// padLines joins lines, with empty ones added up to height.
func padLines(lines []string, height int) string {
	for len(lines) < height {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// percent is an available ratio as mcpctl and the web board show it
// (output.Percent): three decimals and a percent sign; "-" when unknown.
func percent(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r*100, 'f', 3, 64) + "%"
}
