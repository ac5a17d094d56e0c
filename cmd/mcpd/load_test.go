package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/simulate"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// loadShape is one load test: servers heartbeating at mcpd's interval for
// a while, through one or more replicas that all sweep. A probe only
// reports its figure: it measures where the machine's capacity ends.
type loadShape struct {
	servers  int
	interval time.Duration
	duration time.Duration
	replicas int
	probe    bool
}

// envLoadShape runs one shape instead: "SERVERS INTERVAL DURATION
// REPLICAS", e.g. "1000 200ms 15s 1", as a probe.
const envLoadShape = "MCPD_LOAD_SHAPE"

// The short variant runs at I = 1s: at 200ms the margin before a false
// degraded (2I = 400ms) is below the stalls of a shared 2-core machine
// (docs/reliability.md).
func loadShapes() []loadShape {
	if spec := os.Getenv(envLoadShape); spec != "" {
		var sh loadShape
		var iv, d string
		if _, err := fmt.Sscanf(spec, "%d %s %s %d", &sh.servers, &iv, &d, &sh.replicas); err == nil {
			sh.interval, _ = time.ParseDuration(iv)
			sh.duration, _ = time.ParseDuration(d)
			sh.probe = true
			return []loadShape{sh}
		}
	}
	if longRun() {
		return []loadShape{
			{servers: 5000, interval: 2 * time.Second, duration: 3 * time.Minute, replicas: 1},
			{servers: 5000, interval: 2 * time.Second, duration: 3 * time.Minute, replicas: 2},
			// Where the capacity ends: 5,000 heartbeats a second wanted.
			{servers: 5000, interval: time.Second, duration: time.Minute, replicas: 1, probe: true},
			{servers: 1000, interval: e2eInterval, duration: time.Minute, replicas: 1, probe: true},
		}
	}
	servers := onEngine(1000, citusLoadServers)
	return []loadShape{
		{servers: servers, interval: time.Second, duration: 12 * time.Second, replicas: 1},
		{servers: servers, interval: time.Second, duration: 12 * time.Second, replicas: 2},
	}
}

// citusLoadServers is the short variant's fleet when the test databases
// are on Citus (MCPD_TEST_ENGINE=citus): three nodes, two replicas and
// the simulator on the 2 cores that hold one node for plain PostgreSQL.
// With 1,000 servers a make citus-e2e run (2026-12-05 11:24 UTC, load
// average 15) answered 149 of 10,187 heartbeats 503 (the store timed
// out), and a run of the test alone failed its registrations five times
// in a row; what Citus carries on this machine is make bench's question.
const citusLoadServers = 500

// TestLoadWithoutFalseAlarms runs pkg/simulate against the real binary on
// PostgreSQL with no heartbeat missed on purpose: no server may be moved
// away from healthy during the run (no degraded, unhealthy or recovered
// event while it heartbeats) unless mcpd's own log shows it had finished
// none of the server's heartbeats for the lag the mark needs (a starved
// machine: the contract's mark, reported), --verify finds no mismatch,
// and the figure is the heartbeat rate, error rate and latency.
// MCPD_LONG=1: 5,000 servers for 3 minutes.
func TestLoadWithoutFalseAlarms(t *testing.T) {
	// Not parallel: the load takes the machine.
	for _, shape := range loadShapes() {
		t.Run(fmt.Sprintf("%d servers every %s %d replicas", shape.servers, shape.interval, shape.replicas), func(t *testing.T) {
			db := pgtest.NewDB(t)
			// On Citus a tenant's registrations queue for its feed counter
			// on its worker, and under the race detector on a loaded 2-core
			// machine the simulator's 500 at once ran past 5 s five times
			// in a row (a clean-clone CI run, 2026-12-05): the capacity
			// measured here is the heartbeats', so they get 10 s there.
			timeout := onEngine("5s", "10s")
			var reps []*proc
			for range shape.replicas {
				// The production request timeout: 5,000 registrations at once
				// queue for the pool's connections longer than startMcpd's 2 s.
				// No tenant rate limit: the long shapes put 2,500-5,000 calls
				// a second of one tenant on one replica, past the default
				// 2,000; this test measures capacity, not the limits.
				reps = append(reps, startMcpd(t, db.AppURL, "--log-level", "debug", "--heartbeat-interval", shape.interval.String(),
					"--monitor-period", (shape.interval/2).String(), "--request-timeout", timeout,
					"--tenant-rate-limit", "0"))
			}
			// One simulation per replica, each its own tenant and share of
			// the servers; every replica sweeps them all.
			per := shape.servers / shape.replicas
			sums := make([]simulate.Summary, len(reps))
			errs := make([]error, len(reps))
			var wg sync.WaitGroup
			for i, p := range reps {
				tok := p.token(t, uuid.New())
				wg.Go(func() {
					sums[i], errs[i] = runSimulation(t, p.addr, tok, per, shape.duration, fmt.Sprintf("load%d", i), int64(i+1))
				})
			}
			wg.Wait()
			st := readState(t, db.Admin)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("simulation %d: %v", i, err)
				}
			}
			var sent, failed int64
			var rate, p50, p99, maxLat float64
			mismatches := 0
			byStatus := map[string]int64{}
			for _, s := range sums {
				sent += s.HeartbeatsSent
				failed += s.Errors
				rate += s.HeartbeatsPerSecond
				p50 = max(p50, s.LatencyP50Ms)
				p99 = max(p99, s.LatencyP99Ms)
				maxLat = max(maxLat, s.LatencyMaxMs)
				for k, v := range s.ErrorsByStatus {
					byStatus[k] += v
				}
				if s.Verify != nil {
					mismatches += len(s.Verify.Mismatches)
				}
			}
			// The batch records the time its transaction starts and logs
			// the heartbeat after it commits: up to a heartbeat's latency
			// later.
			slack := max(shape.interval/2, time.Duration(maxLat*float64(time.Millisecond)))
			fa := falseAlarms(st, shape.interval, slack, reps)
			errRate := 0.0
			if sent > 0 {
				errRate = float64(failed) / float64(sent)
			}
			for i, p := range reps {
				assertNoPanic(t, fmt.Sprintf("replica %d", i), p.stderr.String())
			}
			sweepTimeouts := 0
			for _, p := range reps {
				sweepTimeouts += len(logLines(p.stderr.String(), `"level":"ERROR"`, "store unavailable"))
			}
			kind := "FIGURE load"
			if shape.probe {
				kind = "FIGURE load probe"
			}
			t.Logf("%s: %d servers at I=%s for %s through %d replica(s): %d heartbeats, %.0f/s, errors %d "+
				"(rate %.5f%%) %v, latency p50 %.2fms p99 %.2fms max %.2fms (worst replica); %s; verify mismatches %d; "+
				"store timeouts logged %d",
				kind, shape.servers, shape.interval, shape.duration, shape.replicas, sent, rate, failed, 100*errRate,
				byStatus, p50, p99, maxLat, fa, mismatches, sweepTimeouts)
			if shape.probe {
				return
			}
			// A sweep that ran out of time on a starved machine is logged at
			// error level and is no false alarm (the blind-window rule covers
			// the gap); any other error is a failure.
			for i, p := range reps {
				for _, line := range logLines(p.stderr.String(), `"level":"ERROR"`) {
					if !strings.Contains(line, "store unavailable") && !strings.Contains(line, "mass heartbeat loss: transitions applied") {
						t.Errorf("replica %d logged an error: %s", i, line)
					}
				}
			}
			// mcpd may never mark a server it heard from in time. In the
			// short variant no server may be marked less than 2I (3I)
			// after mcpd logged one of its heartbeats; one that mcpd had
			// not heard from for that long (the generator or mcpd starved
			// on a loaded machine) is marked by the contract, and
			// reported. The long one runs for minutes on a shared machine:
			// there only the marks proven early fail.
			if fa.early > 0 || mismatches > 0 || !longRun() && fa.unproven > 0 {
				t.Fatalf("false alarms under load: %s; %d verify mismatches: %s", fa, mismatches, firstMismatch(sums))
			}
			if errRate > 0.001 {
				t.Fatalf("heartbeat error rate %.3f%% (%v)", 100*errRate, byStatus)
			}
		})
	}
}

// runSimulation runs mcpctl heartbeat-simulate --verify -o json (the
// pkg/simulate engine, built without the race detector so that the load
// generator keeps up) against the mcpd at addr, and returns its summary. A
// failed verification is in the summary, not an error.
func runSimulation(t *testing.T, addr, token string, servers int, d time.Duration, prefix string, seed int64) (simulate.Summary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mcpctlPath(t), "heartbeat-simulate", "--server", "http://"+addr,
		"--servers", strconv.Itoa(servers), "--duration", d.String(), "--prefix", prefix,
		"--seed", strconv.FormatInt(seed, 10), "--verify", "-o", "json")
	cmd.Env = append(os.Environ(), "MCPCTL_TOKEN="+token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var sum simulate.Summary
	if jerr := json.Unmarshal(stdout.Bytes(), &sum); jerr != nil {
		return sum, fmt.Errorf("mcpctl heartbeat-simulate: %v (%v)\n%s%s", err, jerr, stdout.String(), stderr.String())
	}
	return sum, nil
}

var (
	mcpctlOnce  sync.Once
	mcpctlBin   string
	mcpctlBuild error
)

// mcpctlPath builds mcpctl once, next to the mcpd binary of TestMain.
func mcpctlPath(t *testing.T) string {
	t.Helper()
	mcpctlOnce.Do(func() {
		mcpctlBin = filepath.Join(filepath.Dir(binPath), "mcpctl")
		if out, err := exec.Command("go", "build", "-o", mcpctlBin, "../mcpctl").CombinedOutput(); err != nil {
			mcpctlBuild = fmt.Errorf("build mcpctl: %v\n%s", err, out)
		}
	})
	if mcpctlBuild != nil {
		t.Fatal(mcpctlBuild)
	}
	return mcpctlBin
}

// alarms sums up the transitions of a load run that no server deserved.
type alarms struct {
	degraded, unhealthy int // servers moved away from healthy while heartbeating
	early               int // of those transitions, how many came before mcpd's own log shows 2I (3I) of silence, less the slack
	late                int // the others: mcpd heard nothing for that long (the generator was late)
	unproven            int // of all, how many came before mcpd's own log shows 2I (3I) of silence, without the slack
	warmup              int // transitions of the warm-up, not counted
	registration        time.Duration
	slack               time.Duration
	buckets             map[int]int // false transitions by 10 s after the warm-up
}

func (a alarms) String() string {
	return fmt.Sprintf("falsely degraded %d, falsely unhealthy %d servers (transitions before 2I/3I less %s of silence "+
		"in mcpd's log %d, after late heartbeats %d, before 2I/3I of silence in mcpd's log %d; by 10 s %v); "+
		"warm-up transitions not counted %d (registration took %s)",
		a.degraded, a.unhealthy, a.slack.Round(time.Millisecond), a.early, a.late, a.unproven, a.buckets, a.warmup,
		a.registration.Round(time.Millisecond))
}

// falseAlarms finds the false transitions of a run: a degraded or
// unhealthy event followed by more heartbeats of its server. Not counted:
// the warm-up (the generator sends no heartbeat before every server is
// registered, which takes longer than 2I for thousands) and the silence
// after the run's end. Each false transition is then held against the
// heartbeats that the replicas logged for the server: early when mcpd had
// logged one less than 2I (3I for unhealthy) less slack before it, late
// otherwise; and unproven when mcpd had logged one less than 2I (3I)
// before it (early included): the log is written after the heartbeat is
// recorded, so a mark without one for that long is the contract's.
func falseAlarms(st dbState, interval, slack time.Duration, reps []*proc) alarms {
	a := alarms{slack: slack, buckets: map[int]int{}}
	var regStart, regEnd time.Time
	for _, evs := range st.events {
		if regStart.IsZero() || evs[0].occurred.Before(regStart) {
			regStart = evs[0].occurred
		}
		if evs[0].occurred.After(regEnd) {
			regEnd = evs[0].occurred
		}
	}
	a.registration = regEnd.Sub(regStart)
	cutoff := regEnd.Add(2 * interval)
	var heard map[string][]time.Time // server_id -> heartbeat log times, sorted
	for id, s := range st.servers {
		deg, unh := false, false
		for _, e := range st.events[id][1:] {
			if e.occurred.Before(cutoff) {
				a.warmup++
				continue
			}
			if e.kind != registry.KindDegraded && e.kind != registry.KindUnhealthy || !e.occurred.Before(s.lastHB) {
				continue
			}
			a.buckets[int(e.occurred.Sub(cutoff)/(10*time.Second))*10]++
			due := registry.DegradedAfter(interval)
			if e.kind == registry.KindUnhealthy {
				due, unh = registry.UnhealthyAfter(interval), true
			} else {
				deg = true
			}
			if heard == nil {
				heard = heartbeatLog(reps)
			}
			times := heard[id.String()]
			i := sort.Search(len(times), func(i int) bool { return !times[i].Before(e.occurred) })
			if i > 0 && e.occurred.Sub(times[i-1]) < due-slack {
				a.early++
			} else {
				a.late++
			}
			if i > 0 && e.occurred.Sub(times[i-1]) < due {
				a.unproven++
			}
		}
		if deg {
			a.degraded++
		}
		if unh {
			a.unhealthy++
		}
	}
	return a
}

// heartbeatLog reads the heartbeat lines of the replicas' logs (every
// heartbeat's at debug level, hence the replicas' --log-level debug): the
// times mcpd acknowledged each server's heartbeats.
func heartbeatLog(reps []*proc) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, p := range reps {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			if !strings.Contains(line, `"msg":"heartbeat"`) && !strings.Contains(line, `"msg":"first heartbeat"`) &&
				!strings.Contains(line, `"msg":"heartbeat changed status"`) {
				continue
			}
			var rec struct {
				Time     time.Time `json:"time"`
				ServerID string    `json:"server_id"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil {
				out[rec.ServerID] = append(out[rec.ServerID], rec.Time)
			}
		}
	}
	for _, times := range out {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	}
	return out
}

func firstMismatch(sums []simulate.Summary) string {
	for _, s := range sums {
		if s.Verify != nil && len(s.Verify.Mismatches) > 0 {
			m := s.Verify.Mismatches[0]
			return fmt.Sprintf("%s want %v got %s", m.ModuleName, m.Want, m.Got)
		}
	}
	return "none"
}
