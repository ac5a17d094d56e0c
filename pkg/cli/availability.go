package cli

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

type availabilityOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	// Server is the SERVER_ID|MODULE argument: ServerID when it is a UUID,
	// else Module.
	ServerID   uuid.UUID
	Module     string
	WindowFlag string

	Window registry.AvailabilityWindow
}

func newCmdServersAvailability(f *Factory, runF func(*availabilityOptions) error) *cobra.Command {
	opts := &availabilityOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "availability SERVER_ID|MODULE",
		Short: "Show what a server delivered over the last hour, day, week or month",
		Long: `Show a server's availability over a window ending now, computed by mcpd from
its audit trail (GET /v1/mcp/servers/{server_id}/availability): the share of
the window it was available (healthy or degraded), the time in each status,
the transitions and the outages (unhealthy or deregistered), newest first.
A server registered inside the window counts from its registration; time
deregistered counts as not available. docs/availability.md says what the
figures mean and how the monitor's detection delay biases them.

The server is named by its SERVER_ID or its module name. Piped, figures are
"key<TAB>value" lines in seconds and the ratio, then the outages.`,
		Example: `  mcpctl servers availability calendar
  mcpctl servers availability 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c --window 30d
  mcpctl servers availability calendar --window 7d -o json | jq .available_ratio`,
		Args:              exactArgs("SERVER_ID|MODULE"),
		ValidArgsFunction: completeServerIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := registry.ParseAvailabilityWindow(opts.WindowFlag)
			if err != nil || opts.WindowFlag == "" {
				return usagef("invalid --window %q: want 1h, 24h, 7d or 30d", opts.WindowFlag)
			}
			opts.Window = w
			opts.ServerID, opts.Module = uuid.Nil, ""
			if id, err := uuid.Parse(args[0]); err == nil && len(args[0]) == 36 {
				opts.ServerID = id
			} else if registry.ValidModuleName(args[0]) {
				opts.Module = args[0]
			} else {
				return usagef("invalid SERVER_ID|MODULE %q: want a server's UUID or a module name", args[0])
			}
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(availabilityRun(cmd.Context(), opts))
		},
	}
	cmd.Flags().StringVar(&opts.WindowFlag, "window", string(registry.DefaultAvailabilityWindow), "the window ending now: 1h, 24h, 7d or 30d")
	_ = cmd.RegisterFlagCompletionFunc("window", fixedCompletions("1h", "24h", "7d", "30d"))
	return cmd
}

func availabilityRun(ctx context.Context, opts *availabilityOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	id := opts.ServerID
	if opts.Module != "" {
		list, err := c.Servers(ctx, client.ListServersParams{ModuleName: opts.Module, Limit: 1})
		if err != nil {
			return err
		}
		if len(list.Servers) == 0 {
			return fmt.Errorf("no server of module %q", opts.Module)
		}
		id = list.Servers[0].ServerID
	}
	a, err := c.ServerAvailability(ctx, id, opts.Window)
	if err != nil {
		return err
	}
	return opts.Printer.Availability(a)
}

type skillAvailabilityOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	Name       string
	WindowFlag string

	Window registry.AvailabilityWindow
}

func newCmdSkillsAvailability(f *Factory, runF func(*skillAvailabilityOptions) error) *cobra.Command {
	opts := &skillAvailabilityOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "availability NAME",
		Short: "Show what a skill delivered over the last hour, day, week or month",
		Long: `Show a skill's availability over a window ending now, computed by mcpd from
the audit trail of the servers that offer it
(GET /v1/mcp/skills/{name}/availability): the skill is available while at
least one of them is, and the time before any of them registered is not
observed. docs/availability.md says what the figures mean.`,
		Example: `  mcpctl skills availability search
  mcpctl skills availability search --window 7d -o json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := registry.ParseAvailabilityWindow(opts.WindowFlag)
			if err != nil || opts.WindowFlag == "" {
				return usagef("invalid --window %q: want 1h, 24h, 7d or 30d", opts.WindowFlag)
			}
			opts.Window, opts.Name = w, args[0]
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(skillAvailabilityRun(cmd.Context(), opts))
		},
	}
	cmd.Flags().StringVar(&opts.WindowFlag, "window", string(registry.DefaultAvailabilityWindow), "the window ending now: 1h, 24h, 7d or 30d")
	_ = cmd.RegisterFlagCompletionFunc("window", fixedCompletions("1h", "24h", "7d", "30d"))
	return cmd
}

func skillAvailabilityRun(ctx context.Context, opts *skillAvailabilityOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	a, err := c.SkillAvailability(ctx, opts.Name, opts.Window)
	if err != nil {
		return err
	}
	return opts.Printer.Availability(a)
}

// printServers prints a list of servers; -o wide asks mcpd for their
// available ratios of the last 24 h, 100 servers a call. The list is
// printed without them, and a note says why on stderr, when mcpd cannot
// give them (one without the endpoint answers 404).
func printServers(ctx context.Context, c *client.Client, p *output.Printer, servers []registry.Server) error {
	if p.Format != output.Wide || len(servers) == 0 {
		return p.Servers(servers)
	}
	ids := make([]uuid.UUID, len(servers))
	for i, s := range servers {
		ids[i] = s.ServerID
	}
	ratios, err := c.AvailabilityRatios(ctx, ids, registry.Window24h)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		if p.ErrOut != nil {
			fmt.Fprintf(p.ErrOut, "note: no availability column: %v\n", err)
		}
		ratios = nil
	}
	return p.ServersWithAvailability(servers, ratios)
}
