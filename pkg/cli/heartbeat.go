package cli

import (
	"context"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
)

type heartbeatOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	// ServerID, or Module when SERVER_ID was a module name.
	ServerID uuid.UUID
	Module   string
}

func newCmdHeartbeat(f *Factory, runF func(*heartbeatOptions) error) *cobra.Command {
	opts := &heartbeatOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "heartbeat SERVER_ID",
		Short: "Send one heartbeat for a server",
		Long: `Send one heartbeat for a server. A degraded or unhealthy server is healthy
again at once and the skills its outage took away come back. A deregistered
server cannot heartbeat (409): it must register again.

SERVER_ID is the server's id, or its module name: the tenant's server of
that module.`,
		Example: `  mcpctl heartbeat 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c
  mcpctl heartbeat calendar`,
		Args:              exactArgs("SERVER_ID"),
		ValidArgsFunction: completeServerIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseServerRef(args[0])
			if err != nil {
				return err
			}
			opts.ServerID, opts.Module = ref.ID, ref.Module
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(heartbeatRun(cmd.Context(), opts))
		},
	}
	return cmd
}

func heartbeatRun(ctx context.Context, opts *heartbeatOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	id, err := serverRef{ID: opts.ServerID, Module: opts.Module}.resolve(ctx, c)
	if err != nil {
		return err
	}
	srv, err := c.Heartbeat(ctx, id)
	if err != nil {
		return err
	}
	return opts.Printer.Server(srv)
}

type deregisterOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	// ServerID, or Module when SERVER_ID was a module name.
	ServerID uuid.UUID
	Module   string
}

func newCmdDeregister(f *Factory, runF func(*deregisterOptions) error) *cobra.Command {
	opts := &deregisterOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "deregister SERVER_ID",
		Short: "Deregister a server",
		Long: `Deregister a server: its status becomes deregistered and every skill
unavailable. Deregistering a deregistered server changes nothing and
succeeds. The server comes back only by registering again.

SERVER_ID is the server's id, or its module name: the tenant's server of
that module.`,
		Example: `  mcpctl deregister 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c
  mcpctl deregister calendar`,
		Args:              exactArgs("SERVER_ID"),
		ValidArgsFunction: completeServerIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseServerRef(args[0])
			if err != nil {
				return err
			}
			opts.ServerID, opts.Module = ref.ID, ref.Module
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(deregisterRun(cmd.Context(), opts))
		},
	}
	return cmd
}

func deregisterRun(ctx context.Context, opts *deregisterOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	id, err := serverRef{ID: opts.ServerID, Module: opts.Module}.resolve(ctx, c)
	if err != nil {
		return err
	}
	srv, err := c.Deregister(ctx, id)
	if err != nil {
		return err
	}
	return opts.Printer.Server(srv)
}
