// Command mcpd is the registry of MCP servers: its HTTP API, health monitor
// and audit trail. See docs/mcpd.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
)

func main() { os.Exit(run()) }

// run is mcpd with the process's arguments, streams and signals: SIGINT and
// SIGTERM stop it cleanly (in-flight requests drained, exit 0); SIGHUP
// makes it re-read its TLS certificate, key and client CA files at once.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return daemon.MainReload(ctx, os.Args[1:], os.Stdout, os.Stderr, hup, setGCPercent)
}

// postgresGCPercent is the GC percent of mcpd on PostgreSQL when GOGC is
// not set.
const postgresGCPercent = 400

// setGCPercent: with PostgreSQL mcpd keeps no state per server, its heap is
// what requests in flight hold (under 30 MiB at full heartbeat load).
// Collecting at 5x that instead of 2x costs some 10 MiB and saves 10-20 %
// of mcpd's CPU per heartbeat (docs/performance.md); as open connections
// make the live heap grow, the tuner (gctune.go) lowers the percent after
// each collection. With --dev the heap is the registry: Go's default
// percent, which the tuner lowers the same way as the registry grows.
// GOGC in the environment keeps Go's default.
func setGCPercent(cfg config.Config) {
	if os.Getenv("GOGC") != "" {
		return
	}
	if cfg.Dev {
		startGCTuner(devGCPercent)
		return
	}
	startGCTuner(postgresGCPercent)
}

// devGCPercent is Go's default, mcpd --dev's for a small registry.
const devGCPercent = 100
