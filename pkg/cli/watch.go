package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/tui"
)

type watchOptions struct {
	IO     *IOStreams
	Client func() (*client.Client, error)
	Now    func() time.Time

	Refresh time.Duration
	NoColor bool
}

func newCmdWatch(f *Factory, runF func(*watchOptions) error) *cobra.Command {
	opts := &watchOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Watch the fleet live in the terminal",
		Long: `Show a live board of the tenant's servers: the count per status, a table
of servers with the age of their last heartbeat, and the latest transitions
from the audit trail, read again every --refresh.

Keys: q or ctrl+c quits; the help line at the bottom lists the others
(filter, sort). It needs a terminal; scripts use "mcpctl servers list".`,
		Example: `  mcpctl watch --refresh 5s`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Refresh < 100*time.Millisecond {
				return usagef("invalid --refresh %s: want at least 100ms", opts.Refresh)
			}
			if !opts.IO.outTTY() {
				return usagef("watch needs a terminal; in scripts use mcpctl servers list")
			}
			opts.NoColor = f.Getenv("NO_COLOR") != ""
			if runF != nil {
				return runF(opts)
			}
			return failed(watchRun(cmd.Context(), opts))
		},
	}
	cmd.Flags().DurationVar(&opts.Refresh, "refresh", tui.DefaultRefresh, "time between two reads of the API")
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
		Refresh: opts.Refresh,
		NoColor: opts.NoColor,
		Now:     opts.Now,
	})
}
