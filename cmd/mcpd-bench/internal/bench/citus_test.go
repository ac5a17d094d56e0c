package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestCitusRowSet runs the Citus row set at a tiny size: both engines
// start, register, heartbeat and sweep, through the store and through a
// real mcpd, and the rows give each ratio and no false transition.
func TestCitusRowSet(t *testing.T) {
	if ok, err := pgtest.CitusInstalled(); err != nil {
		t.Fatal(err)
	} else if !ok {
		pgtest.Missing(t, "Citus is not installed: "+pgtest.InstallCitus)
	}
	work := t.TempDir()
	for _, dir := range []string{filepath.Dir(work), work} {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.CitusOnly, cfg.CitusServers, cfg.CitusDuration, cfg.WorkDir = true, 40, 1500*time.Millisecond, work
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]Row{}
	for _, r := range rep.Rows {
		rows[r.ID] = r
	}
	for _, id := range []string{"citus_light", "citus_saturation", "citus_register", "citus_register_serial", "citus_sweep", "citus_saturation_cpu",
		"citus_mcpd_light", "citus_mcpd_saturation", "citus_mcpd_saturation_cpu", "citus_mcpd_register"} {
		r, ok := rows[id]
		if !ok || r.Verdict == "error" || r.Verdict == "skipped" || r.Value <= 0 {
			t.Errorf("row %s: %+v (present %v)", id, r, ok)
		}
	}
	// The CPU per call is in the notes of the loads that measure it, and
	// nowhere else.
	if n := rows["citus_register"].Note; !strings.Contains(n, "µs per call") {
		t.Errorf("citus_register: no CPU per call in %q", n)
	}
	if n := rows["citus_register_serial"].Note; strings.Contains(n, "CPU") {
		t.Errorf("citus_register_serial measures no CPU, its note says %q", n)
	}
	for _, id := range []string{"citus_false_transitions", "citus_mcpd_false_transitions"} {
		if r := rows[id]; r.Verdict != "pass" || r.Value != 0 {
			t.Errorf("%s: %+v", id, r)
		}
	}
	res, ok := rep.Details["citus"].([]CitusEngineResult)
	if !ok || len(res) != 2 {
		t.Fatalf("details: %#v", rep.Details["citus"])
	}
	for _, e := range res {
		if e.Sweeps == 0 || e.Register.Calls != 40 || e.Serial.Calls != 40 || e.Saturation.Calls == 0 {
			t.Errorf("%s: %d sweeps, %d registrations, %d serial, %d heartbeats at saturation",
				e.Engine, e.Sweeps, e.Register.Calls, e.Serial.Calls, e.Saturation.Calls)
		}
		if m := e.MCPD; m == nil || m.Registered != 40 || m.Register.Calls != 40 || m.Light.Calls == 0 || m.Sweeps == 0 {
			t.Errorf("%s through mcpd: %+v (%s)", e.Engine, m, e.MCPDError)
		}
	}
	if rep.Details["citus_version"] == nil {
		t.Error("no Citus version in the details")
	}
}
