package simulate

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Summary is the outcome of a run; its JSON is what `-o json` prints.
type Summary struct {
	Servers         int     `json:"servers"`
	IntervalSeconds float64 `json:"interval_seconds"`
	Seed            int64   `json:"seed"`
	// DurationSeconds is the length of the heartbeat phase, registration
	// excluded.
	DurationSeconds float64 `json:"duration_seconds"`
	HeartbeatsSent  int64   `json:"heartbeats_sent"`
	HeartbeatsOK    int64   `json:"heartbeats_ok"`
	// Errors counts the failed calls of the heartbeat phase: heartbeats and
	// the scenario's deregistrations.
	Errors int64 `json:"errors"`
	// ErrorsByStatus counts them by HTTP status ("503"), or "transport" for
	// a call that got no answer.
	ErrorsByStatus      map[string]int64 `json:"errors_by_status"`
	HeartbeatsPerSecond float64          `json:"heartbeats_per_second"`
	LatencyP50Ms        float64          `json:"latency_p50_ms"`
	LatencyP90Ms        float64          `json:"latency_p90_ms"`
	LatencyP99Ms        float64          `json:"latency_p99_ms"`
	LatencyMaxMs        float64          `json:"latency_max_ms"`
	// Missed counts heartbeats skipped on purpose (MissRate).
	Missed int64 `json:"missed"`
	// SkippedByScenario counts heartbeats not sent because the scenario had
	// stopped the server.
	SkippedByScenario int64 `json:"skipped_by_scenario"`
	// Deregistered counts servers deregistered by the scenario.
	Deregistered int           `json:"deregistered"`
	Verify       *VerifyResult `json:"verify"`
	VerifyFailed bool          `json:"verify_failed"`
}

// VerifyResult compares the statuses the API reports with those the run
// implies.
type VerifyResult struct {
	// Checked counts the servers compared, Tolerated among them.
	Checked int `json:"checked"`
	// Tolerated counts servers near a status boundary, for which either
	// neighbouring status was accepted.
	Tolerated int `json:"tolerated"`
	// Skipped counts servers with no expectation (a failed deregistration).
	Skipped    int        `json:"skipped"`
	Mismatches []Mismatch `json:"mismatches"`
}

// Mismatch is a server whose status is not the one expected.
type Mismatch struct {
	Index      int               `json:"index"`
	ModuleName string            `json:"module_name"`
	ServerID   string            `json:"server_id"`
	Want       []registry.Status `json:"want"` // one status, or two near a boundary
	Got        string            `json:"got"`  // a status, or "missing"
}

// maxMismatchLines bounds the mismatches WriteText lists.
const maxMismatchLines = 20

// WriteText writes the summary for people, one fact a line.
func (s Summary) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	line("servers", "%d", s.Servers)
	line("interval", "%s", seconds(s.IntervalSeconds))
	line("duration", "%s", seconds(s.DurationSeconds))
	line("heartbeats sent", "%d (ok %d)", s.HeartbeatsSent, s.HeartbeatsOK)
	line("heartbeats/s", "%.1f", s.HeartbeatsPerSecond)
	line("latency", "p50 %.2fms  p90 %.2fms  p99 %.2fms  max %.2fms", s.LatencyP50Ms, s.LatencyP90Ms, s.LatencyP99Ms, s.LatencyMaxMs)
	line("errors", "%d%s", s.Errors, errorsByStatus(s.ErrorsByStatus))
	line("missed on purpose", "%d", s.Missed)
	if s.SkippedByScenario > 0 || s.Deregistered > 0 {
		line("stopped by scenario", "%d heartbeats not sent", s.SkippedByScenario)
		line("deregistered", "%d", s.Deregistered)
	}
	line("seed", "%d", s.Seed)
	if v := s.Verify; v != nil {
		verdict := "ok"
		if s.VerifyFailed {
			verdict = "FAILED"
		}
		line("verify", "%s: %d checked (%d near a boundary), %d skipped, %d mismatches",
			verdict, v.Checked, v.Tolerated, v.Skipped, len(v.Mismatches))
	}
	_ = tw.Flush()
	if s.Verify == nil {
		return
	}
	for i, m := range s.Verify.Mismatches {
		if i == maxMismatchLines {
			fmt.Fprintf(w, "  … and %d more mismatches\n", len(s.Verify.Mismatches)-i)
			break
		}
		want := make([]string, len(m.Want))
		for j, st := range m.Want {
			want[j] = string(st)
		}
		fmt.Fprintf(w, "  mismatch: %s (index %d, %s): want %s, got %s\n",
			m.ModuleName, m.Index, m.ServerID, strings.Join(want, " or "), m.Got)
	}
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

func errorsByStatus(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
