package bench

import (
	"strings"
	"testing"
	"time"
)

func citusMCPDSample() (plain, citus CitusMCPDResult) {
	plain = CitusMCPDResult{
		Register: LoadResult{Calls: 2000, Throughput: 1000}, Light: LoadResult{Calls: 40000, Throughput: 4000, P50: time.Millisecond},
		Saturation: LoadResult{Calls: 80000, Throughput: 8000}, PGMicrosLight: 10, PGMicrosSat: 5, PGMicrosReg: 300,
		Registered: 2000, Sweeps: 6, Flush: FlushMetrics{WritesOK: 600}}
	citus = CitusMCPDResult{
		Register: LoadResult{Calls: 2000, Throughput: 500}, Light: LoadResult{Calls: 36000, Throughput: 3600},
		Saturation: LoadResult{Calls: 48000, Throughput: 4800}, PGMicrosLight: 30, PGMicrosSat: 15, PGMicrosReg: 900,
		Registered: 2000, Sweeps: 6, Flush: FlushMetrics{WritesOK: 600}}
	return plain, citus
}

func citusMCPDRowMap(plain, citus CitusMCPDResult) map[string]Row {
	rows := map[string]Row{}
	for _, r := range citusMCPDRows("light", "sat", "false", "2,000", plain, citus) {
		rows[r.ID] = r
	}
	return rows
}

// TestCitusMCPDRows: the rows through mcpd give each ratio Citus ÷ plain,
// judged against the targets, and the false transitions.
func TestCitusMCPDRows(t *testing.T) {
	plain, citus := citusMCPDSample()
	rows := citusMCPDRowMap(plain, citus)
	for id, want := range map[string]struct {
		value   float64
		verdict string
	}{
		"citus_mcpd_light":             {0.9, "pass"},
		"citus_mcpd_saturation":        {0.6, "pass"},
		"citus_mcpd_saturation_cpu":    {3, "info"},
		"citus_mcpd_false_transitions": {0, "pass"},
		"citus_mcpd_register":          {0.5, "info"},
	} {
		r, ok := rows[id]
		if !ok || r.Verdict != want.verdict || r.Value < want.value-1e-9 || r.Value > want.value+1e-9 {
			t.Errorf("%s: got %+v (present %v), want %v %s", id, r, ok, want.value, want.verdict)
		}
	}
	if r := rows["citus_mcpd_light"]; r.Target != targetCitusLight || !strings.Contains(r.Note, "plain 4,000/s") {
		t.Errorf("light: %+v", r)
	}
	if r := rows["citus_mcpd_saturation"]; r.Target != targetCitusSat {
		t.Errorf("saturation: %+v", r)
	}
}

// TestCitusMCPDRowsFail: a ratio under its target, a load with errors, a
// transition on either engine, a failed sweep or flush, or no sweep on
// Citus, each fails its row.
func TestCitusMCPDRowsFail(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(plain, citus *CitusMCPDResult)
		id     string
	}{
		"slow light":        {func(_, c *CitusMCPDResult) { c.Light.Throughput = 2000 }, "citus_mcpd_light"},
		"collapse":          {func(_, c *CitusMCPDResult) { c.Saturation.Throughput = 3000 }, "citus_mcpd_saturation"},
		"errors":            {func(_, c *CitusMCPDResult) { c.Saturation.Errors, c.Saturation.FirstError = 3, "503" }, "citus_mcpd_saturation"},
		"plain errors":      {func(p, _ *CitusMCPDResult) { p.Light.Errors = 1 }, "citus_mcpd_light"},
		"citus transition":  {func(_, c *CitusMCPDResult) { c.Transitions = 1 }, "citus_mcpd_false_transitions"},
		"plain transition":  {func(p, _ *CitusMCPDResult) { p.Transitions = 2 }, "citus_mcpd_false_transitions"},
		"no sweep on Citus": {func(_, c *CitusMCPDResult) { c.Sweeps = 0 }, "citus_mcpd_false_transitions"},
		"sweep failed":      {func(p, _ *CitusMCPDResult) { p.SweepFailures = 1 }, "citus_mcpd_false_transitions"},
		"flush failed":      {func(_, c *CitusMCPDResult) { c.Flush.WritesError = 1 }, "citus_mcpd_false_transitions"},
		"flush dropped":     {func(_, c *CitusMCPDResult) { c.Flush.Dropped = 5 }, "citus_mcpd_false_transitions"},
	} {
		plain, citus := citusMCPDSample()
		tc.change(&plain, &citus)
		if r := citusMCPDRowMap(plain, citus)[tc.id]; r.Verdict != "FAIL" {
			t.Errorf("%s: %s is %+v", name, tc.id, r)
		}
	}
	plain, citus := citusMCPDSample()
	plain.Light.Throughput = 0
	if r := citusMCPDRowMap(plain, citus)["citus_mcpd_light"]; r.Verdict != "error" {
		t.Errorf("plain did nothing: %+v", r)
	}
}

// TestMetricValue sums a metric's samples across labels, and only that
// metric's.
func TestMetricValue(t *testing.T) {
	text := []byte(`# HELP mcpd_sweep_failures_total sweeps that failed
# TYPE mcpd_sweep_failures_total counter
mcpd_sweep_failures_total 2
mcpd_sweep_failures_total_other 7
mcpd_sweep_duration_seconds_bucket{le="0.1"} 3
mcpd_sweep_duration_seconds_count 12
mcpd_heartbeats_total{result="ok"} 100
mcpd_heartbeats_total{result="error"} 1.5
`)
	for name, want := range map[string]float64{
		"mcpd_sweep_failures_total":         2,
		"mcpd_sweep_duration_seconds_count": 12,
		"mcpd_heartbeats_total":             101.5,
		"mcpd_absent":                       0,
	} {
		if got := metricValue(text, name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
