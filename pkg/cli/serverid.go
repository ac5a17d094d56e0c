package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

// parseServerID parses a SERVER_ID argument; anything but a UUID is bad usage.
func parseServerID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, usagef("invalid SERVER_ID %q: want a UUID like 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c", s)
	}
	return id, nil
}

// serverRef is a SERVER_ID argument: a server id, or a module name that
// stands for the tenant's server of that module, as the MCP tool
// get_server takes either.
type serverRef struct {
	ID     uuid.UUID
	Module string
}

// parseServerRef parses a SERVER_ID argument: a UUID is a server id, a
// module name (1-63 of [a-z0-9-], starting with a letter) a module;
// anything else is bad usage.
func parseServerRef(s string) (serverRef, error) {
	if id, err := uuid.Parse(s); err == nil && len(s) == 36 {
		return serverRef{ID: id}, nil
	}
	if registry.ValidModuleName(s) {
		return serverRef{Module: s}, nil
	}
	return serverRef{}, usagef("invalid SERVER_ID %q: want a server id (a UUID like 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c) or a module name (calendar)", s)
}

// resolve returns the server id that r names: its id, or the id of the
// tenant's server of its module, looked up with the list's module_name
// filter (whatever its status).
func (r serverRef) resolve(ctx context.Context, c *client.Client) (uuid.UUID, error) {
	if r.Module == "" {
		return r.ID, nil
	}
	list, err := c.Servers(ctx, client.ListServersParams{ModuleName: r.Module, Limit: 1})
	if err != nil {
		return uuid.Nil, err
	}
	if len(list.Servers) == 0 {
		return uuid.Nil, fmt.Errorf("no server of module %q for the token's tenant", r.Module)
	}
	return list.Servers[0].ServerID, nil
}

// serverIDOptions are the options of a command that acts on one server,
// named by its one argument SERVER_ID (heartbeat, deregister, servers get,
// servers skills).
type serverIDOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	// ServerID, or Module when SERVER_ID was a module name.
	ServerID uuid.UUID
	Module   string
}

// serverIDRun is the run of a SERVER_ID command: it resolves SERVER_ID,
// makes the call for that server and prints its answer.
func serverIDRun[T any](ctx context.Context, opts *serverIDOptions,
	call func(*client.Client, context.Context, uuid.UUID) (T, error), show func(*output.Printer, T) error) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	id, err := serverRef{ID: opts.ServerID, Module: opts.Module}.resolve(ctx, c)
	if err != nil {
		return err
	}
	answer, err := call(c, ctx, id)
	if err != nil {
		return err
	}
	return show(opts.Printer, answer)
}

// newServerIDCmd completes cmd (its Use, help and example set) as a
// SERVER_ID command: one argument, completed with the tenant's servers and
// parsed by parseServerRef, then runF (a test's) or run.
func newServerIDCmd(f *Factory, cmd *cobra.Command, runF func(*serverIDOptions) error,
	run func(context.Context, *serverIDOptions) error) *cobra.Command {
	opts := &serverIDOptions{IO: f.IOStreams, Client: f.Client}
	cmd.Args = exactArgs("SERVER_ID")
	cmd.ValidArgsFunction = completeServerIDs(f)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ref, err := parseServerRef(args[0])
		if err != nil {
			return err
		}
		opts.ServerID, opts.Module = ref.ID, ref.Module
		opts.Printer = f.printer()
		if runF != nil {
			return runF(opts)
		}
		return failed(run(cmd.Context(), opts))
	}
	return cmd
}

// completionTimeout bounds the API call behind a shell completion.
const completionTimeout = 3 * time.Second

// completeServerIDs completes a SERVER_ID argument with the servers of the
// token's tenant, each described by its module and status.
func completeServerIDs(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := f.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		servers, err := c.AllServers(ctx, client.ListServersParams{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		out := make([]cobra.Completion, 0, len(servers))
		for _, s := range servers {
			out = append(out, cobra.CompletionWithDesc(s.ServerID.String(), fmt.Sprintf("%s %s (%s)", s.ModuleName, s.Version, s.Status)))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func statusNames() []string {
	names := make([]string, len(registry.Statuses))
	for i, s := range registry.Statuses {
		names[i] = string(s)
	}
	return names
}

// kindCompletions completes a --kind flag: every kind, with its help.
func kindCompletions(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	out := make([]cobra.Completion, len(registry.Kinds))
	for i, k := range registry.Kinds {
		out[i] = cobra.CompletionWithDesc(string(k.Kind), k.Help)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// kindHelp lists every kind with its help, for a command's long help.
func kindHelp() string {
	var b strings.Builder
	for _, k := range registry.Kinds {
		fmt.Fprintf(&b, "\n  %-25s %s", k.Kind, k.Help)
	}
	return b.String()
}
