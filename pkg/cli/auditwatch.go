package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

type auditWatchOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	ServerIDFlag string
	Module       string
	KindFlag     string
	Cursor       string

	ServerID string
	Kind     registry.EventKind
}

func newCmdAuditWatch(f *Factory, runF func(*auditWatchOptions) error) *cobra.Command {
	opts := &auditWatchOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print audit events as they happen, until interrupted",
		Long: `Follow the change feed of the token's tenant (GET /v1/mcp/watch) and print
each audit event as it commits, until interrupted (ctrl+c: exit 0).

It starts at the present, or after --cursor: an event's position, or the
watch_cursor of a list answer (then nothing after that list is missed). A
dropped connection is resumed by itself from the last position received,
without a gap or a duplicate; it says so on stderr. When interrupted it
prints on stderr the position to resume from with --cursor.

Output: on a terminal one row per event under a header (times in RFC 3339);
piped, tab-separated rows; -o json one event object a line (NDJSON); -o yaml
one document per event, each after "---". Bookmarks (the feed's keep-alive
positions) are not printed.

A cursor that is no longer resumable (410 Cursor expired) ends the command
with exit 1: list again (mcpctl audit list) and watch from the present.`,
		Example: `  mcpctl audit watch
  mcpctl audit watch --kind mcp.server.unhealthy -o json | jq -r .module_name
  mcpctl audit watch --module calendar --cursor "$CURSOR"`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.ServerID, opts.Kind = "", ""
			if opts.ServerIDFlag != "" {
				id, err := parseServerID(opts.ServerIDFlag)
				if err != nil {
					return usagef("invalid --server-id %q: want a UUID", opts.ServerIDFlag)
				}
				opts.ServerID = id.String()
			}
			if opts.KindFlag != "" {
				k, err := registry.ParseEventKind(opts.KindFlag)
				if err != nil {
					return &UsageError{Err: fmt.Errorf("invalid --kind: %w", err)}
				}
				opts.Kind = k
			}
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(auditWatchRun(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ServerIDFlag, "server-id", "", "only events about this server")
	fl.StringVar(&opts.Module, "module", "", "only events about this module's server")
	fl.StringVar(&opts.KindFlag, "kind", "", "only events of this kind, e.g. mcp.server.unhealthy")
	fl.StringVar(&opts.Cursor, "cursor", "", "start after this position (an event's id, a list's watch_cursor); default: the present")
	_ = cmd.RegisterFlagCompletionFunc("kind", kindCompletions)
	_ = cmd.RegisterFlagCompletionFunc("server-id", completeServerIDs(f))
	return cmd
}

// auditWatchRun prints the feed until ctx ends (nil: an interruption is a
// success) or the API refuses the watch.
func auditWatchRun(ctx context.Context, opts *auditWatchOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	stream := opts.Printer.EventStream()
	last := opts.Cursor
	dropped := false
	params := client.WatchParams{
		ServerID: opts.ServerID, ModuleName: opts.Module, Kind: string(opts.Kind), Cursor: opts.Cursor,
		OnState: func(err error) {
			switch {
			case err != nil:
				dropped = true
				fmt.Fprintf(opts.IO.ErrOut, "Connection lost (%s); reconnecting…\n", oneLine(err.Error()))
			case dropped:
				dropped = false
				fmt.Fprintln(opts.IO.ErrOut, "Reconnected; resuming after the last event.")
			}
		},
	}
	err = c.Watch(ctx, params, func(msg client.WatchEvent) error {
		if msg.ID != "" {
			last = msg.ID
		}
		if msg.Bookmark {
			return nil
		}
		return stream.Event(msg.Event)
	})
	var p *apiwire.Problem
	if errors.As(err, &p) && p.Status == http.StatusGone {
		return &cursorExpiredError{p: p}
	}
	if errors.As(err, &p) && p.Status == http.StatusBadRequest && opts.Cursor != "" && last == opts.Cursor {
		// Refused before any event: the cursor given, which the client
		// sends as the stream's Last-Event-ID (the name in the problem).
		return fmt.Errorf("invalid --cursor %q: %w", opts.Cursor, err)
	}
	if err != nil {
		return err
	}
	if last != "" {
		fmt.Fprintf(opts.IO.ErrOut, "Stopped. Resume with: --cursor %s\n", last)
	}
	return nil
}

// cursorExpiredError is a 410 answer to a watch, with what to do about it.
type cursorExpiredError struct{ p *apiwire.Problem }

func (e *cursorExpiredError) Error() string {
	return e.p.Error() + "\nThe cursor is too old to resume from: list again (mcpctl audit list) and watch from the present (mcpctl audit watch without --cursor)."
}

// oneLine folds the blanks and line breaks of s into single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
