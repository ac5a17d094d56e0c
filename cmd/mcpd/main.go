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
// SIGTERM stop it cleanly (in-flight requests drained, exit 0); SIGHUP
// makes it re-read its TLS certificate, key and client CA files at once.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return daemon.MainReload(ctx, os.Args[1:], os.Stdout, os.Stderr, hup)
}
