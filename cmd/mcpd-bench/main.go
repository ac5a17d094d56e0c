// Command mcpd-bench is mcpd's benchmark harness (make bench): it starts its
// own durable PostgreSQL, seeds it, starts mcpd against it and prints one
// table of measures against their targets, also written as JSON. See
// docs/performance.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/cyberos/mcpd/cmd/mcpd-bench/internal/bench"
)

func main() { os.Exit(run()) }

func run() int {
	if os.Getenv("GOGC") == "" {
		// The load driver shares the machine with what it measures: it
		// collects garbage less often, as mcpd on PostgreSQL does, so that
		// the instrument takes less of the 2 cores.
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return benchMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

func benchMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := bench.DefaultConfig()
	fs := flag.NewFlagSet("mcpd-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Tenants, "tenants", cfg.Tenants, "seeded tenants")
	fs.IntVar(&cfg.Modules, "modules", cfg.Modules, "servers (modules) per seeded tenant")
	fs.IntVar(&cfg.BigTenant, "big-tenant", cfg.BigTenant, "servers of the extra tenant the paging measure walks (0: skip)")
	fs.IntVar(&cfg.LargeTenants, "large-tenants", cfg.LargeTenants, "tenants of the large sweep's fleet, x -modules servers (0: skip)")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "concurrent clients of the closed loops (mcpd and etcd)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of each closed loop")
	fs.DurationVar(&cfg.OpenDuration, "open-duration", cfg.OpenDuration, "length of the open loop")
	fs.DurationVar(&cfg.PgbenchDuration, "pgbench-duration", cfg.PgbenchDuration, "length of each pgbench run")
	fs.DurationVar(&cfg.ListDuration, "list-duration", cfg.ListDuration, "length of each list measure")
	pgbenchClients := fs.String("pgbench-clients", joinInts(cfg.PgbenchClients), "comma-separated client counts of pgbench")
	watchers := fs.String("watchers", joinInts(cfg.Watchers), "comma-separated watcher counts of the change feed loads (empty: skip)")
	fleet := fs.String("fleet", joinInts(cfg.Fleet), "comma-separated sizes of the fleet loads, each server its own connection at 10 s (empty: skip)")
	fs.DurationVar(&cfg.FleetDuration, "fleet-duration", cfg.FleetDuration, "length of each fleet load")
	fleetTLS := fs.String("fleet-tls", joinInts(cfg.FleetTLS), "comma-separated sizes of the fleet loads over TLS, then a reconnection round and an mcpd restart (empty: skip)")
	fs.BoolVar(&cfg.Tracing, "tracing", cfg.Tracing, "measure the heartbeat loop with tracing off, on at 100 % and at 1 % sampling")
	fs.IntVar(&cfg.SweepRuns, "sweep-runs", cfg.SweepRuns, "sweeps timed per case (median reported)")
	fs.BoolVar(&cfg.DevServers, "dev", cfg.DevServers, "measure mcpd --dev holding the seeded fleet's size")
	fs.StringVar(&cfg.MCPD, "mcpd", cfg.MCPD, "mcpd binary (default: built from this module)")
	fs.StringVar(&cfg.Go, "go", cfg.Go, "go command that builds mcpd")
	fs.StringVar(&cfg.Etcd, "etcd", cfg.Etcd, "etcd binary (default: etcd on PATH; skipped when there is none)")
	fs.IntVar(&cfg.EtcdLeases, "etcd-leases", cfg.EtcdLeases, "leases the etcd baseline keeps alive")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", cfg.ProfileDir, "write CPU and allocation profiles of an in-process heartbeat load here (empty: skip)")
	fs.DurationVar(&cfg.ProfileDuration, "profile-duration", cfg.ProfileDuration, "length of the profiled load")
	fs.StringVar(&cfg.WorkDir, "work-dir", cfg.WorkDir, "where the temporary cluster and logs go; must be on a disk (default: the temporary directory)")
	fs.BoolVar(&cfg.Keep, "keep", cfg.Keep, "keep the temporary directory (logs)")
	fs.Int64Var(&cfg.MaxCalls, "max-calls", cfg.MaxCalls, "bound on the calls of any one load")
	fs.BoolVar(&cfg.Anchors, "anchors", cfg.Anchors, "measure the anchors beside the fleet loads: a plain net/http server and pgbench at the fleets' rates")
	serveAnchor := fs.Bool(strings.TrimPrefix(bench.AnchorFlag, "-"), false, "serve the plain net/http anchor on --listen instead (the harness starts itself so)")
	serveFloor := fs.Bool(strings.TrimPrefix(bench.FloorFlag, "-"), false, "serve the floor (net/http with mcpd's per-request work, no store) on --listen instead (the harness starts itself so)")
	floorSecret := fs.String(strings.TrimPrefix(bench.FloorSecretFlag, "-"), "", "with -serve-floor: the HS256 secret file tokens are verified with")
	listen := fs.String("listen", "127.0.0.1:0", "with -serve-anchor or -serve-floor: the address to serve on")
	fs.IntVar(&cfg.CitusServers, "citus-servers", cfg.CitusServers, "servers of the Citus row set: the same store load on plain PostgreSQL and on a 3-node Citus cluster, when Citus is installed (0: skip)")
	fs.IntVar(&cfg.CitusTenants, "citus-tenants", cfg.CitusTenants, "tenants of the Citus row set's fleet (both workers hold some)")
	fs.DurationVar(&cfg.CitusDuration, "citus-duration", cfg.CitusDuration, "length of each heartbeat load of the Citus row set")
	fs.BoolVar(&cfg.CitusOnly, "citus-only", cfg.CitusOnly, "run the Citus row set alone")
	out := fs.String("out", "docs/bench-latest.json", "write the report as JSON here (empty: do not)")
	md := fs.String("markdown", "", "also write the table as Markdown here")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *serveAnchor {
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(100) // the anchor is plain net/http: Go's default
		}
		if err := bench.ServeAnchor(ctx, *listen); err != nil {
			fmt.Fprintf(stderr, "mcpd-bench: anchor: %v\n", err)
			return 1
		}
		return 0
	}
	if *serveFloor {
		if *floorSecret == "" {
			fmt.Fprintf(stderr, "mcpd-bench: %s needs %s\n", bench.FloorFlag, bench.FloorSecretFlag)
			return 2
		}
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(100) // plain net/http: Go's default
		}
		if err := bench.ServeFloor(ctx, *listen, *floorSecret); err != nil {
			fmt.Fprintf(stderr, "mcpd-bench: floor: %v\n", err)
			return 1
		}
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpd-bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	clients, err := parseInts(*pgbenchClients)
	if err != nil {
		fmt.Fprintf(stderr, "mcpd-bench: -pgbench-clients: %v\n", err)
		return 2
	}
	cfg.PgbenchClients = clients
	if *watchers != "" {
		if cfg.Watchers, err = parseInts(*watchers); err != nil {
			fmt.Fprintf(stderr, "mcpd-bench: -watchers: %v\n", err)
			return 2
		}
	} else {
		cfg.Watchers = nil
	}
	if cfg.Fleet, err = parseInts(*fleet); err != nil {
		fmt.Fprintf(stderr, "mcpd-bench: -fleet: %v\n", err)
		return 2
	}
	if cfg.FleetTLS, err = parseInts(*fleetTLS); err != nil {
		fmt.Fprintf(stderr, "mcpd-bench: -fleet-tls: %v\n", err)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "mcpd-bench: %v\n", err)
		return 2
	}

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := bench.Run(ctx, cfg, logger)
	if rep == nil {
		fmt.Fprintf(stderr, "mcpd-bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nmcpd-bench: %s, %d cores, %s; PostgreSQL %s (data on %s); etcd %s\n",
		rep.Machine.CPU, rep.Machine.Cores, rep.Machine.Go, rep.Machine.PostgreSQL, rep.Machine.DataFS, orNone(rep.Machine.Etcd))
	fmt.Fprintf(stdout, "load average at start %s, at end %s; run took %s\n\n",
		rep.Machine.LoadStart, rep.Machine.LoadEnd, rep.Duration.Round(1e9))
	if werr := rep.WriteTable(stdout); werr != nil {
		fmt.Fprintf(stderr, "mcpd-bench: %v\n", werr)
		return 1
	}
	code := 0
	if *out != "" {
		if werr := rep.WriteJSON(*out); werr != nil {
			fmt.Fprintf(stderr, "mcpd-bench: write %s: %v\n", *out, werr)
			code = 1
		} else {
			fmt.Fprintf(stdout, "\nreport written to %s\n", *out)
		}
	}
	if *md != "" {
		f, werr := os.Create(*md)
		if werr == nil {
			werr = rep.WriteMarkdown(f)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
		}
		if werr != nil {
			fmt.Fprintf(stderr, "mcpd-bench: write %s: %v\n", *md, werr)
			code = 1
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcpd-bench: %v\n", err)
		return 1
	}
	return code
}

func orNone(s string) string {
	if s == "" {
		return "not run"
	}
	return s
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
