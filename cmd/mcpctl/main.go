// Command mcpctl operates an mcpd registry of MCP servers: see
// docs/cli/mcpctl.md or `mcpctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cyberos/mcpd/pkg/cli"
	"github.com/cyberos/mcpd/pkg/termguard"
)

func main() { os.Exit(run()) }

func run() int {
	// TERM was hidden while the packages were initialised (see termguard).
	termguard.Restore()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Main(ctx, os.Args[1:], cli.SystemIO())
}
