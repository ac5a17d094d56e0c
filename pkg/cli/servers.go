package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

// maxListPages bounds how many pages a listing follows.
const maxListPages = 10_000

func newCmdServers(f *Factory) *cobra.Command {
	cmd := newGroupCmd("servers", "List and inspect registered servers")
	cmd.AddCommand(
		newCmdServersList(f, nil),
		newCmdServersGet(f, nil),
		newCmdServersSkills(f, nil),
		newCmdServersAvailability(f, nil),
	)
	return cmd
}

// newCmdList is `mcpctl list`, the same command as `mcpctl servers list`.
func newCmdList(f *Factory, runF func(*listOptions) error) *cobra.Command {
	cmd := newCmdServersList(f, runF)
	cmd.Short = "List servers (same as servers list)"
	return cmd
}

type listOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	StatusFlag string
	Module     string
	Limit      int

	Status registry.Status
}

func newCmdServersList(f *Factory, runF func(*listOptions) error) *cobra.Command {
	opts := &listOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List servers",
		Long: `List the servers of the token's tenant, ordered by module name, following
every page unless --limit stops earlier.

Columns: module, version, status, protocols and the age of the last
heartbeat; -o wide adds the server ID, the share of the last 24 hours it was
available (docs/availability.md), the registration age, the trace id and
the keys of the capability advertisement. Piped, rows are tab-separated
without a header and times are RFC 3339.`,
		Example: `  mcpctl servers list
  mcpctl list --status unhealthy -o wide
  mcpctl servers list --module calendar -o json | jq -r '.[].server_id'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Status = ""
			if opts.StatusFlag != "" {
				st, err := registry.ParseStatus(opts.StatusFlag)
				if err != nil {
					return &UsageError{Err: fmt.Errorf("invalid --status: %w", err)}
				}
				opts.Status = st
			}
			if opts.Limit < 0 {
				return usagef("invalid --limit %d: want 0 (all) or more", opts.Limit)
			}
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(listRun(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.StatusFlag, "status", "", "only servers with this status: healthy, degraded, unhealthy or deregistered")
	fl.StringVar(&opts.Module, "module", "", "only the server of this module")
	fl.IntVar(&opts.Limit, "limit", 0, "print at most this many servers (0: all)")
	_ = cmd.RegisterFlagCompletionFunc("status", fixedCompletions(statusNames()...))
	return cmd
}

func listRun(ctx context.Context, opts *listOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	params := client.ListServersParams{Status: string(opts.Status), ModuleName: opts.Module}
	var servers []registry.Server
	if opts.Limit == 0 {
		if servers, err = c.AllServers(ctx, params); err != nil {
			return err
		}
		return printServers(ctx, c, opts.Printer, servers)
	}
	for page := 0; page < maxListPages && len(servers) < opts.Limit; page++ {
		params.Limit = min(opts.Limit-len(servers), registry.MaxPageLimit)
		list, err := c.Servers(ctx, params)
		if err != nil {
			return err
		}
		servers = append(servers, list.Servers...)
		if list.NextCursor == nil || *list.NextCursor == "" {
			break
		}
		params.Cursor = *list.NextCursor
	}
	if len(servers) > opts.Limit {
		servers = servers[:opts.Limit]
	}
	return printServers(ctx, c, opts.Printer, servers)
}

func newCmdServersGet(f *Factory, runF func(*serverIDOptions) error) *cobra.Command {
	return newServerIDCmd(f, &cobra.Command{
		Use:   "get SERVER_ID",
		Short: "Show one server",
		Long: `Show one server. SERVER_ID is the server's id, or its module name: the
tenant's server of that module, whatever its status.`,
		Example: `  mcpctl servers get 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c -o json
  mcpctl servers get calendar`,
	}, runF, getRun)
}

func getRun(ctx context.Context, opts *serverIDOptions) error {
	return serverIDRun(ctx, opts, (*client.Client).Server, (*output.Printer).Server)
}

func newCmdServersSkills(f *Factory, runF func(*serverIDOptions) error) *cobra.Command {
	return newServerIDCmd(f, &cobra.Command{
		Use:   "skills SERVER_ID",
		Short: "List the skills of a server and whether each is available",
		Long: `List the skills of a server. A skill is unavailable while its server is
unhealthy or deregistered (reason server_unhealthy, server_deregistered) or
for a reason of its own.

SERVER_ID is the server's id, or its module name: the tenant's server of
that module.`,
		Example: `  mcpctl servers skills 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c
  mcpctl servers skills calendar`,
	}, runF, skillsRun)
}

func skillsRun(ctx context.Context, opts *serverIDOptions) error {
	return serverIDRun(ctx, opts, (*client.Client).Skills, (*output.Printer).Skills)
}
