package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Direction says which way a measure should go against its target.
type Direction int

// Directions of a target.
const (
	// Info has no target: a baseline or a figure to read.
	Info Direction = iota
	// AtLeast passes when the value is at least the target.
	AtLeast
	// AtMost passes when the value is at most the target.
	AtMost
)

// Row is one line of the results table.
type Row struct {
	ID      string  `json:"id"`
	Measure string  `json:"measure"`
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	// Target is the bound the value is judged by (none for Info).
	Target    float64   `json:"target,omitempty"`
	Direction Direction `json:"-"`
	// Ratio is Value / Target.
	Ratio float64 `json:"ratio,omitempty"`
	// Verdict is pass, FAIL, info, skipped or error.
	Verdict string `json:"verdict"`
	// Basis says what kind of figure Value is (Basis*): CPU time per
	// call, comparable across runs on a busy machine, or wall clock, which
	// a busy machine makes worse; when empty, add infers it from Unit.
	Basis string `json:"basis,omitempty"`
	// Note says where the target comes from, or why the row was skipped.
	Note string `json:"note,omitempty"`
}

// Bases of rows.
const (
	// BasisCPU: CPU time per call (or a ratio of two), comparable across
	// runs.
	BasisCPU = "cpu/call"
	// BasisWall: wall clock (latency, throughput, or a ratio of two).
	BasisWall = "wall"
	// BasisMemory: a process's memory.
	BasisMemory = "memory"
	// BasisBytes: bytes written per call (WAL).
	BasisBytes = "bytes/call"
	// BasisCount: a count.
	BasisCount = "count"
)

// inferBasis is the basis of a row of unit when none was given.
func inferBasis(unit string) string {
	switch unit {
	case unitMicros:
		return BasisCPU
	case unitMillis, unitPerSecond, unitSeconds:
		return BasisWall
	case unitMiB, "KiB":
		return BasisMemory
	case unitBytes:
		return BasisBytes
	case unitCount:
		return BasisCount
	}
	return ""
}

// judge fills Ratio and Verdict.
func (r *Row) judge() {
	switch {
	case r.Verdict != "":
	case r.Direction == Info || r.Target == 0:
		r.Verdict = "info"
	default:
		r.Ratio = r.Value / r.Target
		ok := r.Value >= r.Target
		if r.Direction == AtMost {
			ok = r.Value <= r.Target
		}
		r.Verdict = "pass"
		if !ok {
			r.Verdict = "FAIL"
		}
	}
}

// Machine describes where the figures were taken.
type Machine struct {
	CPU         string `json:"cpu"`
	Cores       int    `json:"cores"`
	MemoryBytes int64  `json:"memory_bytes"`
	Kernel      string `json:"kernel"`
	Go          string `json:"go"`
	PostgreSQL  string `json:"postgresql"`
	DataFS      string `json:"data_dir_fs"`
	Etcd        string `json:"etcd"`
	// LoadStart and LoadEnd are /proc/loadavg at the start and the end: the
	// machine is shared, and a high load makes every figure worse.
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
}

// Report is everything one run measured.
type Report struct {
	StartedAt time.Time      `json:"started_at"`
	Duration  time.Duration  `json:"duration_ns"`
	Machine   Machine        `json:"machine"`
	Config    Config         `json:"config"`
	Rows      []Row          `json:"rows"`
	Details   map[string]any `json:"details"`
}

func (rep *Report) add(r Row) {
	r.judge()
	if r.Basis == "" {
		r.Basis = inferBasis(r.Unit)
	}
	rep.Rows = append(rep.Rows, r)
}

// skip adds a row that was not measured, saying why.
func (rep *Report) skip(id, measure, why string) {
	rep.Rows = append(rep.Rows, Row{ID: id, Measure: measure, Verdict: "skipped", Note: why})
}

// fail adds a row whose measure failed.
func (rep *Report) fail(id, measure string, err error) {
	rep.Rows = append(rep.Rows, Row{ID: id, Measure: measure, Verdict: "error", Note: firstLine(err.Error())})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// WriteTable prints the rows as an aligned table.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEASURE\tVALUE\tBASIS\tTARGET\tRATIO\tVERDICT")
	for _, r := range rep.Rows {
		value, target, ratio, verdict := r.cells(">=", "<=")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Measure, value, orDash(r.Basis), target, ratio, verdict)
	}
	return tw.Flush()
}

// WriteMarkdown prints the rows as a Markdown table (for docs/performance.md).
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| measure | value | basis | target | ratio | verdict |\n| --- | ---: | --- | ---: | ---: | --- |\n")
	for _, r := range rep.Rows {
		value, target, ratio, verdict := r.cells("≥", "≤")
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Measure, value, orDash(r.Basis), target, ratio, verdict)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cells formats a row's value, target (with atLeast or atMost before it),
// ratio and verdict, "-" where there is none.
func (r Row) cells(atLeast, atMost string) (value, target, ratio, verdict string) {
	value, target, ratio = "-", "-", "-"
	if r.Verdict != "skipped" && r.Verdict != "error" {
		value = formatValue(r.Value, r.Unit)
	}
	if r.Direction != Info && r.Target != 0 {
		op := atLeast
		if r.Direction == AtMost {
			op = atMost
		}
		target = op + " " + formatValue(r.Target, r.Unit)
	}
	if r.Ratio != 0 {
		ratio = fmt.Sprintf("%.2f", r.Ratio)
	}
	verdict = r.Verdict
	if r.Note != "" && (r.Verdict == "skipped" || r.Verdict == "error") {
		verdict += ": " + r.Note
	}
	return value, target, ratio, verdict
}

// WriteJSON writes the report, indented, to path.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Units of rows.
const (
	unitPerSecond = "/s"
	unitMillis    = "ms"
	unitMicros    = "µs"
	unitMiB       = "MiB"
	unitBytes     = "B"
	unitRatio     = "x"
	unitPercent   = "%"
	unitCount     = ""
	unitSeconds   = "s"
)

func formatValue(v float64, unit string) string {
	switch unit {
	case unitPerSecond:
		return groupThousands(v) + "/s"
	case unitMillis:
		switch {
		case v < 1:
			return fmt.Sprintf("%.3f ms", v)
		case v < 100:
			return fmt.Sprintf("%.2f ms", v)
		}
		return fmt.Sprintf("%.0f ms", v)
	case unitMicros:
		return fmt.Sprintf("%.0f µs", v)
	case unitMiB:
		return fmt.Sprintf("%.1f MiB", v)
	case unitBytes:
		return groupThousands(v) + " B"
	case unitRatio:
		return fmt.Sprintf("%.2fx", v)
	case unitPercent:
		return fmt.Sprintf("%.1f %%", v)
	case unitCount:
		return groupThousands(v)
	case unitSeconds:
		return fmt.Sprintf("%.2f s", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}

// groupThousands formats v rounded, with commas: 12,345.
func groupThousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// readMachine describes this machine.
func readMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadavg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for _, line := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				m.MemoryBytes = kb << 10
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return strings.TrimSpace(string(b))
	}
	return strings.Join(f[:3], " ")
}
