// Command mcpctl operates an mcpd registry of MCP servers: see
// docs/cli/mcpctl.md or `mcpctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cyberos/mcpd/pkg/cli"
)

func main() { os.Exit(run()) }

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Main(ctx, os.Args[1:], cli.SystemIO())
}
