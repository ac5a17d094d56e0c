package cli

import (
	"context"
	"errors"
	"regexp"

	"time"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/simulate"
)

// Bounds of heartbeat-simulate's flags.
const (
	maxSimServers  = 100_000
	maxSimDuration = 24 * time.Hour
	minSimInterval = 10 * time.Millisecond
	// maxScenarioBytes bounds what --scenario reads.
	maxScenarioBytes = 1 << 20
)

type simulateOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	Sim simulate.Options
}

// simPrefix is a prefix that keeps PREFIX-0001 a valid module name.
var simPrefix = regexp.MustCompile(`^[a-z][a-z0-9-]{0,49}$`)

// errVerifyFailed: heartbeat-simulate --verify found a difference.
var errVerifyFailed = errors.New("verify failed: the registry does not match what the simulation sent")

func newCmdSimulate(f *Factory, runF func(*simulateOptions) error) *cobra.Command {
	opts := &simulateOptions{IO: f.IOStreams, Client: f.Client}
	sim := &opts.Sim
	cmd := &cobra.Command{
		Use:   "heartbeat-simulate --servers N --duration D [flags]",
		Short: "Simulate a fleet of servers that register and heartbeat",
		Long: `Register N simulated servers (modules PREFIX-0001 and on) and send their
heartbeats every --interval (by default the interval mcpd reports) for
--duration, each wait spread by --jitter and a share of the heartbeats
skipped on purpose (--miss-rate), then print a summary: calls, failures,
latencies and the servers per status (-o json or -o yaml: the summary
object).

--scenario names a YAML timeline of stop, resume, deregister and flap events
for chosen servers, so that the monitor's degraded and unhealthy transitions
and the recoveries can be watched (mcpctl watch). --verify checks at the end
that every server has the status the run implies, and exits 1 when one does
not. A progress line is rewritten on stderr when stderr is a terminal.
Servers stay registered at the end unless the scenario deregisters them.`,
		Example: `  mcpctl heartbeat-simulate --servers 100 --duration 2m
  mcpctl heartbeat-simulate --servers 1000 --duration 5m --interval 10s --miss-rate 0.05 --verify -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case sim.Servers < 1 || sim.Servers > maxSimServers:
				return usagef("invalid --servers %d: want 1 to %d", sim.Servers, maxSimServers)
			case sim.Duration <= 0 || sim.Duration > maxSimDuration:
				return usagef("invalid --duration %s: want more than 0 and at most %s", sim.Duration, maxSimDuration)
			case sim.Interval != 0 && sim.Interval < minSimInterval:
				return usagef("invalid --interval %s: want 0 (the interval mcpd reports) or at least %s", sim.Interval, minSimInterval)
			case !(sim.MissRate >= 0 && sim.MissRate <= 1): // NaN too
				return usagef("invalid --miss-rate %g: want 0 to 1", sim.MissRate)
			case !(sim.Jitter >= 0 && sim.Jitter < 1): // NaN too
				return usagef("invalid --jitter %g: want 0 up to (not including) 1", sim.Jitter)
			case sim.Concurrency < 0:
				return usagef("invalid --concurrency %d: want 0 (automatic) or more", sim.Concurrency)
			case !simPrefix.MatchString(sim.Prefix):
				return usagef("invalid --prefix %q: want 1-50 of [a-z0-9-], starting with a letter", sim.Prefix)
			}
			if sim.ScenarioFile != "" {
				b, err := readFlagFile("scenario", sim.ScenarioFile, maxScenarioBytes)
				if err != nil {
					return err
				}
				if _, err := simulate.ParseScenario(b); err != nil {
					return usagef("--scenario %s: %v", sim.ScenarioFile, err)
				}
			}
			// simulate reads 0 as its default jitter and a negative value as none.
			if sim.Jitter == 0 {
				sim.Jitter = -1
			}
			sim.Progress = nil
			if opts.IO.errTTY() {
				sim.Progress = opts.IO.ErrOut
			}
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(simulateRun(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&sim.Servers, "servers", 0, "how many servers to simulate")
	fl.DurationVar(&sim.Duration, "duration", 0, "how long to send heartbeats")
	fl.DurationVar(&sim.Interval, "interval", 0, "time between two heartbeats of a server (0: the interval mcpd reports)")
	fl.Float64Var(&sim.MissRate, "miss-rate", 0, "share of heartbeats not sent, 0 to 1")
	fl.Float64Var(&sim.Jitter, "jitter", simulate.DefaultJitter, "random spread of each wait either way, as a share of the interval (0: none, below 1)")
	fl.StringVar(&sim.Prefix, "prefix", simulate.DefaultPrefix, "module name prefix of the simulated servers (PREFIX-0001 and on)")
	fl.IntVar(&sim.Concurrency, "concurrency", 0, "requests in flight at most (0: automatic)")
	fl.StringVar(&sim.ScenarioFile, "scenario", "", "scenario file to replay instead of random misses")
	fl.BoolVar(&sim.Verify, "verify", false, "check the registry against what was sent at the end; exit 1 on a difference")
	fl.Int64Var(&sim.Seed, "seed", 0, "seed of the random choices (0: random)")
	_ = cmd.MarkFlagRequired("servers")
	_ = cmd.MarkFlagRequired("duration")
	_ = cmd.MarkFlagFilename("scenario")
	return cmd
}

func simulateRun(ctx context.Context, opts *simulateOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	sum, err := simulate.Run(ctx, c, opts.Sim)
	if errors.Is(err, simulate.ErrScenario) {
		// A scenario that does not fit the run (an event past --duration):
		// bad usage, found before any call.
		return &UsageError{Err: err}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && sum.Servers > 0 {
			// Interrupted: what was done is still worth printing.
			_ = printSummary(opts, sum)
		}
		return err
	}
	if err := printSummary(opts, sum); err != nil {
		return err
	}
	if sum.VerifyFailed {
		return errVerifyFailed
	}
	return nil
}

func printSummary(opts *simulateOptions, sum simulate.Summary) error {
	if opts.Printer.Format.Structured() {
		return opts.Printer.Object(sum, nil)
	}
	sum.WriteText(opts.IO.Out)
	return nil
}
