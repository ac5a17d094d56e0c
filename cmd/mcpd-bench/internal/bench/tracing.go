package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/cyberos/mcpd/pkg/testing/otlptest"
)

// TracingCase is one run of the tracing cost measure: mcpd started with
// these OTEL_* variables (none: tracing off).
type TracingCase struct {
	ID, Label string
	Env       []string
}

// tracingCases are the three runs of the tracing cost measure: off, on
// with every heartbeat's trace sampled, on with 1 % of them.
func tracingCases(endpoint string) []TracingCase {
	on := "OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint
	return []TracingCase{
		{ID: "off", Label: "tracing off"},
		{ID: "on100", Label: "tracing on, 100 % sampled", Env: []string{on, "OTEL_TRACES_SAMPLER=parentbased_always_on"}},
		{ID: "on1", Label: "tracing on, 1 % sampled", Env: []string{on, "OTEL_TRACES_SAMPLER=parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG=0.01"}},
	}
}

// TracingResult is what one case measured.
type TracingResult struct {
	Case string     `json:"case"`
	Load LoadResult `json:"load"`
	CPU  CPUUse     `json:"cpu"`
	// MCPDMicros and PostgresMicros are the CPU time per heartbeat.
	MCPDMicros     float64 `json:"mcpd_cpu_us_per_heartbeat"`
	PostgresMicros float64 `json:"postgres_cpu_us_per_heartbeat"`
	// Spans is how many spans the in-process OTLP receiver got, the
	// warm-up's and the flush at stop included.
	Spans int `json:"spans"`
}

// i. The cost of tracing: the closed heartbeat loop of b against a fresh
// mcpd per case (off, on at 100 %, on at 1 %), its spans sent to an
// OTLP/HTTP receiver in this process.
func (r *runner) tracingCost(ctx context.Context) {
	if !r.cfg.Tracing || r.mcpdBin == "" {
		return
	}
	rcv := otlptest.NewReceiver(false)
	defer rcv.Close()
	var results []TracingResult
	for _, c := range tracingCases(rcv.URL()) {
		id := "tracing_" + c.ID
		measure := fmt.Sprintf("i. mcpd heartbeats/s, %s, closed loop, %d clients", c.Label, r.cfg.Clients)
		res, err := r.tracingRun(ctx, c, rcv)
		if err != nil {
			r.rep.fail(id, measure, err)
			continue
		}
		results = append(results, res)
		note := fmt.Sprintf("%d errors; p99 %.2f ms; %s", res.Load.Errors, millis(res.Load.P99), res.CPU.Describe("mcpd"))
		if c.Env != nil {
			note += fmt.Sprintf("; %s spans received", groupThousands(float64(res.Spans)))
		}
		r.rep.add(Row{ID: id, Measure: measure, Value: res.Load.Throughput, Unit: unitPerSecond, Note: note})
		r.rep.add(Row{ID: id + "_cpu", Measure: fmt.Sprintf("i. mcpd CPU per heartbeat, %s", c.Label), Value: res.MCPDMicros,
			Unit: unitMicros, Note: fmt.Sprintf("PostgreSQL %.0f µs per heartbeat; CPU time, not wall time", res.PostgresMicros)})
	}
	r.rep.Details["tracing"] = results
}

// tracingRun is one case of tracingCost.
func (r *runner) tracingRun(ctx context.Context, c TracingCase, rcv *otlptest.Receiver) (TracingResult, error) {
	r.log.Info("tracing cost", "case", c.Label, "clients", r.cfg.Clients, "duration", r.cfg.Duration)
	spans0 := rcv.Count()
	m, err := StartMCPDSpec(ctx, MCPDSpec{Path: r.mcpdBin, Dir: r.work, Name: "mcpd-tracing-" + c.ID, Env: c.Env,
		Args: []string{"--database-url", r.appURL, "--auth-jwt-secret-file", r.secretFile,
			"--heartbeat-interval", mcpdHeartbeatInterval.String()}})
	if err != nil {
		return TracingResult{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = m.Stop(mcpdShutdown)
		}
	}()
	fleet, err := NewFleet(m.URL, r.secret, r.cfg.Tenants, r.cfg.Modules)
	if err != nil {
		return TracingResult{}, err
	}
	defer fleet.Close()
	ClosedLoop(ctx, r.cfg.Clients, time.Second, r.cfg.MaxCalls, fleet.Heartbeat) // warm up
	cpu0 := TakeCPUSnapshot(m.PID(), r.pg.PID())
	load := ClosedLoop(ctx, r.cfg.Clients, r.cfg.Duration, r.cfg.MaxCalls, fleet.Heartbeat)
	cpu := TakeCPUSnapshot(m.PID(), r.pg.PID()).Since(cpu0)
	stopped = true
	if err := m.Stop(mcpdShutdown); err != nil {
		return TracingResult{}, fmt.Errorf("stop mcpd: %w", err)
	}
	if load.Throughput == 0 {
		return TracingResult{}, fmt.Errorf("no heartbeat succeeded: %s", load.FirstError)
	}
	mcpdUS, pgUS := cpu.PerCall(load.Calls, load.Elapsed)
	return TracingResult{Case: c.ID, Load: load, CPU: cpu, MCPDMicros: mcpdUS, PostgresMicros: pgUS,
		Spans: rcv.Count() - spans0}, nil
}
