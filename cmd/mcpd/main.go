// Command mcpd is the registry of MCP servers: its HTTP API, health monitor
// and audit trail. See docs/mcpd.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cyberos/mcpd/pkg/daemon"
)

func main() { os.Exit(run()) }

// run is mcpd with the process's arguments, streams and signals: SIGINT and
// SIGTERM stop it cleanly (in-flight requests drained, exit 0).
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return daemon.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
}
