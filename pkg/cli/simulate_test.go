package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/simulate"
)

func TestSimulateParse(t *testing.T) {
	t.Parallel()
	ts := newTestIO()
	var got *simulateOptions
	scenario := writeFile(t, "s.yaml", "events:\n  - at: 3s\n    action: stop\n    range: \"0-4\"\n")
	cmd := newCmdSimulate(testFactory(ts, nil), func(o *simulateOptions) error { got = o; return nil })
	err := execute(t, cmd, "--servers", "50", "--duration", "2m", "--interval", "5s", "--miss-rate", "0.1",
		"--jitter", "0.2", "--prefix", "load", "--concurrency", "8", "--scenario", scenario, "--verify", "--seed", "7")
	if err != nil {
		t.Fatal(err)
	}
	want := simulate.Options{Servers: 50, Duration: 2 * time.Minute, Interval: 5 * time.Second, MissRate: 0.1, Jitter: 0.2,
		Prefix: "load", Concurrency: 8, ScenarioFile: scenario, Verify: true, Seed: 7}
	if got.Sim != want {
		t.Fatalf("options\n%+v\nwant\n%+v", got.Sim, want)
	}

	// Defaults; --jitter 0 is no jitter; progress only on a terminal.
	ts = newTestIO()
	ts.errTTY = true
	cmd = newCmdSimulate(testFactory(ts, nil), func(o *simulateOptions) error { got = o; return nil })
	if err := execute(t, cmd, "--servers", "1", "--duration", "1s", "--jitter", "0"); err != nil {
		t.Fatal(err)
	}
	if got.Sim.Interval != 0 || got.Sim.Jitter >= 0 || got.Sim.Prefix != simulate.DefaultPrefix || got.Sim.Progress != ts.io.ErrOut {
		t.Fatalf("defaults %+v", got.Sim)
	}
	cmd = newCmdSimulate(testFactory(newTestIO(), nil), func(o *simulateOptions) error { got = o; return nil })
	if err := execute(t, cmd, "--servers", "1", "--duration", "1s"); err != nil {
		t.Fatal(err)
	}
	if got.Sim.Jitter != simulate.DefaultJitter || got.Sim.Progress != nil {
		t.Fatalf("default jitter %g, progress %v on a pipe", got.Sim.Jitter, got.Sim.Progress)
	}

	for _, args := range [][]string{
		{"--duration", "1s"},
		{"--servers", "1"},
		{"--servers", "0", "--duration", "1s"},
		{"--servers", "1", "--duration", "-1s"},
		{"--servers", "1", "--duration", "1s", "--interval", "1ms"},
		{"--servers", "1", "--duration", "1s", "--miss-rate", "1.5"},
		{"--servers", "1", "--duration", "1s", "--jitter", "1"},
		// NaN compares false both ways: it passed checks written as
		// x < lo || x > hi, and a jitter of NaN made every wait zero.
		{"--servers", "1", "--duration", "1s", "--jitter", "NaN"},
		{"--servers", "1", "--duration", "1s", "--miss-rate", "NaN"},
		{"--servers", "1", "--duration", "1s", "--prefix", "Bad"},
		{"--servers", "1", "--duration", "1s", "--concurrency", "-2"},
		{"--servers", "x", "--duration", "1s"},
		{"--servers", "1", "--duration", "1s", "--scenario", filepath.Join(t.TempDir(), "missing.yaml")},
		{"--servers", "1", "--duration", "1s", "--scenario", t.TempDir()},
		{"--servers", "1", "--duration", "1s", "--scenario", writeFile(t, "bad.yaml", "events: [{at: 1s, action: explode}]\n")},
	} {
		cmd := newCmdSimulate(testFactory(newTestIO(), nil), func(*simulateOptions) error { t.Fatal("runF reached"); return nil })
		if err := execute(t, cmd, args...); err == nil || exitCode(err) != ExitUsage {
			t.Errorf("heartbeat-simulate %q: %v, want bad usage", args, err)
		}
	}
}

func TestSimulateRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ts := newTestIO()
	opts := &simulateOptions{
		IO: ts.io, Client: b.clientFunc(), Printer: b.printer(ts, output.JSON),
		Sim: simulate.Options{Servers: 3, Duration: 300 * time.Millisecond, Interval: 50 * time.Millisecond, Jitter: -1, Prefix: "sim", Verify: true, Seed: 1},
	}
	if err := simulateRun(context.Background(), opts); err != nil {
		t.Fatalf("%v; stdout %s", err, ts.out)
	}
	var sum map[string]any
	if err := json.Unmarshal(ts.out.Bytes(), &sum); err != nil {
		t.Fatalf("-o json printed %q: %v", ts.out, err)
	}
	if sum["servers"] != float64(3) || sum["verify_failed"] != false {
		t.Fatalf("summary %s", ts.out)
	}
	if ts.errOut.Len() != 0 {
		t.Fatalf("stderr %q with no terminal, want nothing", ts.errOut)
	}
	servers, err := b.client.AllServers(context.Background(), client.ListServersParams{})
	if err != nil || len(servers) != 3 || !strings.HasPrefix(servers[0].ModuleName, "sim-") {
		t.Fatalf("servers after the run: %v, %v", servers, err)
	}

	// The text summary goes to stdout.
	ts = newTestIO()
	opts.IO, opts.Printer = ts.io, b.printer(ts, output.Table)
	opts.Sim.Verify = false
	if err := simulateRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ts.out.Bytes(), []byte("servers")) {
		t.Fatalf("text summary %q", ts.out)
	}
}
