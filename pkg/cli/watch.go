package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/tui"
)

// minRelist is the shortest --relist: a full list of a large tenant is not
// something to do every second.
const minRelist = 5 * time.Second

type watchOptions struct {
	IO     *IOStreams
	Client func() (*client.Client, error)
	Now    func() time.Time

	Relist  time.Duration
	NoColor bool
}

func newCmdWatch(f *Factory, runF func(*watchOptions) error) *cobra.Command {
	opts := &watchOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	var refresh time.Duration
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Watch the fleet live in the terminal",
		Long: `Show a live board of the tenant's servers: the count per status, a table
of servers with the age of their last heartbeat and of their last
transition, and the latest transitions.

The board lists every server once, then follows the change feed
(GET /v1/mcp/watch) from that list's watch_cursor: each transition updates
its server's row within a second, a new registration adds a row. A dropped
connection is resumed without a gap (the header says "reconnecting…" and
a banner why); a cursor the API can no longer resume from makes it list
again. The feed does not carry heartbeats: the ages of the last heartbeats
tick on from the last list (a recovery or a registration resets them);
--relist reads the whole list again every period to correct them, and r
does it at once.

Keys: q or ctrl+c quits; the help line at the bottom lists the others
(filter, sort). It needs a terminal; scripts use "mcpctl servers list" and
"mcpctl audit watch".`,
		Example: `  mcpctl watch
  mcpctl watch --relist 1m`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Relist != 0 && opts.Relist < minRelist {
				return usagef("invalid --relist %s: want 0 (never) or at least %s", opts.Relist, minRelist)
			}
			if !opts.IO.outTTY() {
				return usagef("watch needs a terminal; in scripts use mcpctl servers list or mcpctl audit watch")
			}
			opts.NoColor = f.Getenv("NO_COLOR") != ""
			if runF != nil {
				return runF(opts)
			}
			return failed(watchRun(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&opts.Relist, "relist", 0, "also list every server again every period, to correct the heartbeat ages (0: never)")
	fl.DurationVar(&refresh, "refresh", 0, "ignored")
	_ = fl.MarkDeprecated("refresh", "the board follows the change feed; --relist re-reads the list if wanted")
	return cmd
}

func watchRun(ctx context.Context, opts *watchOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	return tui.Run(ctx, NewSource(c), tui.Options{
		In:      opts.IO.In,
		Out:     opts.IO.Out,
		Relist:  opts.Relist,
		NoColor: opts.NoColor,
		Now:     opts.Now,
	})
}
