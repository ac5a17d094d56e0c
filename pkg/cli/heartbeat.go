package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
)

func newCmdHeartbeat(f *Factory, runF func(*serverIDOptions) error) *cobra.Command {
	return newServerIDCmd(f, &cobra.Command{
		Use:   "heartbeat SERVER_ID",
		Short: "Send one heartbeat for a server",
		Long: `Send one heartbeat for a server. A degraded or unhealthy server is healthy
again at once and the skills its outage took away come back. A deregistered
server cannot heartbeat (409): it must register again.

SERVER_ID is the server's id, or its module name: the tenant's server of
that module.`,
		Example: `  mcpctl heartbeat 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c
  mcpctl heartbeat calendar`,
	}, runF, heartbeatRun)
}

func heartbeatRun(ctx context.Context, opts *serverIDOptions) error {
	return serverIDRun(ctx, opts, (*client.Client).Heartbeat, (*output.Printer).Server)
}

func newCmdDeregister(f *Factory, runF func(*serverIDOptions) error) *cobra.Command {
	return newServerIDCmd(f, &cobra.Command{
		Use:   "deregister SERVER_ID",
		Short: "Deregister a server",
		Long: `Deregister a server: its status becomes deregistered and every skill
unavailable. Deregistering a deregistered server changes nothing and
succeeds. The server comes back only by registering again.

SERVER_ID is the server's id, or its module name: the tenant's server of
that module.`,
		Example: `  mcpctl deregister 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c
  mcpctl deregister calendar`,
	}, runF, deregisterRun)
}

func deregisterRun(ctx context.Context, opts *serverIDOptions) error {
	return serverIDRun(ctx, opts, (*client.Client).Deregister, (*output.Printer).Server)
}
