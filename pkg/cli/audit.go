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

func newCmdAudit(f *Factory) *cobra.Command {
	cmd := newGroupCmd("audit", "Read the audit trail of server transitions")
	cmd.AddCommand(newCmdAuditList(f, nil), newCmdAuditWatch(f, nil))
	return cmd
}

type auditListOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	ServerIDFlag string
	KindFlag     string
	Limit        int

	ServerID *uuid.UUID
	Kind     registry.EventKind
}

func newCmdAuditList(f *Factory, runF func(*auditListOptions) error) *cobra.Command {
	opts := &auditListOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List audit events, oldest first",
		Long: `List the audit events of the token's tenant, oldest first: one event per
transition, of these kinds:` + kindHelp(),
		Example: `  mcpctl audit list --server-id 6f1c2a4e-8b0d-4c3e-9f6a-1d2e3f4a5b6c
  mcpctl audit list --kind mcp.server.unhealthy -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ServerID, opts.Kind = nil, ""
			if opts.ServerIDFlag != "" {
				id, err := parseServerID(opts.ServerIDFlag)
				if err != nil {
					return usagef("invalid --server-id %q: want a UUID", opts.ServerIDFlag)
				}
				opts.ServerID = &id
			}
			if opts.KindFlag != "" {
				k, err := registry.ParseEventKind(opts.KindFlag)
				if err != nil {
					return &UsageError{Err: fmt.Errorf("invalid --kind: %w", err)}
				}
				opts.Kind = k
			}
			if opts.Limit < 0 {
				return usagef("invalid --limit %d: want 0 (all) or more", opts.Limit)
			}
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(auditListRun(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ServerIDFlag, "server-id", "", "only events about this server")
	fl.StringVar(&opts.KindFlag, "kind", "", "only events of this kind, e.g. mcp.server.unhealthy")
	fl.IntVar(&opts.Limit, "limit", 0, "print at most this many events, the oldest (0: all)")
	_ = cmd.RegisterFlagCompletionFunc("kind", kindCompletions)
	_ = cmd.RegisterFlagCompletionFunc("server-id", completeServerIDs(f))
	return cmd
}

func auditListRun(ctx context.Context, opts *auditListOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	params := client.ListEventsParams{Kind: string(opts.Kind)}
	if opts.ServerID != nil {
		params.ServerID = opts.ServerID.String()
	}
	var events []registry.Event
	for page := 0; page < maxListPages; page++ {
		params.Limit = registry.MaxPageLimit
		if opts.Limit > 0 {
			params.Limit = min(opts.Limit-len(events), registry.MaxPageLimit)
		}
		list, err := c.Events(ctx, params)
		if err != nil {
			return err
		}
		events = append(events, list.Events...)
		if list.NextCursor == nil || *list.NextCursor == "" || (opts.Limit > 0 && len(events) >= opts.Limit) {
			break
		}
		params.Cursor = *list.NextCursor
	}
	if opts.Limit > 0 && len(events) > opts.Limit {
		events = events[:opts.Limit]
	}
	return opts.Printer.Events(events)
}
