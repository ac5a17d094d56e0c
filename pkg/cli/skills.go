package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

func newCmdSkills(f *Factory) *cobra.Command {
	cmd := newGroupCmd("skills", "Find skills across the tenant's servers")
	cmd.AddCommand(newCmdSkillsList(f, nil), newCmdSkillsAvailability(f, nil))
	return cmd
}

type skillsListOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	Name             string
	Module           string
	AvailableFlag    bool
	Protocol         string
	ServerStatusFlag string
	Limit            int

	// Available is nil when --available was not given.
	Available    *bool
	ServerStatus registry.Status
}

func newCmdSkillsList(f *Factory, runF func(*skillsListOptions) error) *cobra.Command {
	opts := &skillsListOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List skills across servers, by name then module",
		Long: `List the skills of every server of the token's tenant (GET /v1/mcp/skills),
ordered by skill name and then module name, following every page unless
--limit stops earlier.

--available keeps only the skills that can be used now, --available=false
only those that cannot (their server is unhealthy or deregistered, or the
skill is unavailable for a reason of its own). --protocol keeps the servers
that list this MCP revision.

Columns: name, module, version, available, the reason when not, and the
server's status; -o wide adds the protocols, the server and skill IDs and
the description. -o json and -o yaml print the API's skill objects as an
array.`,
		Example: `  mcpctl skills list --name send-mail --available
  mcpctl skills list --protocol 2025-06-18 --server-status healthy -o wide
  mcpctl skills list --available=false -o json | jq -r '.[].module_name'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Available, opts.ServerStatus = nil, ""
			if cmd.Flags().Changed("available") {
				v := opts.AvailableFlag
				opts.Available = &v
			}
			if opts.ServerStatusFlag != "" {
				st, err := registry.ParseStatus(opts.ServerStatusFlag)
				if err != nil {
					return &UsageError{Err: fmt.Errorf("invalid --server-status: %w", err)}
				}
				opts.ServerStatus = st
			}
			if opts.Protocol != "" {
				if _, err := time.Parse(time.DateOnly, opts.Protocol); err != nil {
					return usagef("invalid --protocol %q: want an MCP revision date YYYY-MM-DD", opts.Protocol)
				}
			}
			if opts.Limit < 0 {
				return usagef("invalid --limit %d: want 0 (all) or more", opts.Limit)
			}
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(skillsListRun(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Name, "name", "", "only skills of this name")
	fl.StringVar(&opts.Module, "module", "", "only skills of this module's server")
	fl.BoolVar(&opts.AvailableFlag, "available", false, "only available skills; --available=false: only unavailable ones")
	fl.StringVar(&opts.Protocol, "protocol", "", "only servers that support this MCP revision, e.g. 2025-06-18")
	fl.StringVar(&opts.ServerStatusFlag, "server-status", "", "only servers with this status: healthy, degraded, unhealthy or deregistered")
	fl.IntVar(&opts.Limit, "limit", 0, "print at most this many skills (0: all)")
	_ = cmd.RegisterFlagCompletionFunc("server-status", fixedCompletions(statusNames()...))
	return cmd
}

func skillsListRun(ctx context.Context, opts *skillsListOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	params := client.ListSkillsParams{
		Name: opts.Name, ModuleName: opts.Module, Available: opts.Available,
		Protocol: opts.Protocol, ServerStatus: string(opts.ServerStatus),
	}
	var skills []registry.SkillEntry
	for page := 0; page < maxListPages; page++ {
		params.Limit = registry.MaxPageLimit
		if opts.Limit > 0 {
			params.Limit = min(opts.Limit-len(skills), registry.MaxPageLimit)
		}
		list, err := c.FindSkills(ctx, params)
		if err != nil {
			return err
		}
		skills = append(skills, list.Skills...)
		if list.NextCursor == nil || *list.NextCursor == "" || (opts.Limit > 0 && len(skills) >= opts.Limit) {
			break
		}
		params.Cursor = *list.NextCursor
	}
	if opts.Limit > 0 && len(skills) > opts.Limit {
		skills = skills[:opts.Limit]
	}
	return opts.Printer.SkillDirectory(skills)
}
