package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/agent"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/mcpinspect"
)

type agentOptions struct {
	IO     *IOStreams
	Client func() (*client.Client, error)

	Module            string
	Version           string
	MCP               string
	MCPCommand        string
	ProbeTimeout      time.Duration
	ConnectTimeout    time.Duration
	DeregisterTimeout time.Duration
	ProbeRevisions    bool
	LogFormat         string
	LogLevel          string
	Traceparent       string
	TokenFile         string
	MCPHeaders        mcpHeaderOptions

	// Filled from the flags by the command before it runs.
	Target    mcpinspect.Target
	Level     slog.Level
	MCPHeader http.Header

	// tune, when set, adjusts the agent's options (tests shorten waits).
	tune func(*agent.Options)
}

func newCmdAgent(f *Factory, runF func(*agentOptions) error) *cobra.Command {
	opts := &agentOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "agent --module NAME (--mcp URL | --mcp-command CMD) [flags]",
		Short: "Keep an MCP server registered while it answers (sidecar)",
		Long: `Run beside an MCP server and keep it registered in mcpd for as long as it
answers. The agent connects to the server as an MCP client (--mcp: streamable
HTTP; --mcp-command: a stdio server it starts, the command split like a shell
would, without one), registers what the server says of itself (as register
--from-mcp does), then heartbeats at the interval mcpd's answer gives (with
±10% jitter). Before each heartbeat it probes the server (ping, or
server/discover on revision 2026-07-28) within --probe-timeout; while probes
fail it sends none, so mcpd marks the server degraded, then unhealthy and its
skills unavailable. The first heartbeat after the server answers again makes
it healthy.

It registers again when the tool list changes
(notifications/tools/list_changed), when a reconnected or restarted server
says something else of itself, and when mcpd answers 404 (it forgot the
server) or 409 (someone deregistered it). Over HTTP it reconnects; a stdio
server that exits is started again, with a backoff from 1s to 30s, never
longer than the heartbeat interval. While mcpd is unreachable or failing it
keeps retrying with a capped exponential backoff and jitter, after mcpd's
Retry-After when longer, never waiting past the heartbeat interval: it never
gives up on its own. SIGTERM or SIGINT: it deregisters
the server (within --deregister-timeout), stops a stdio server and exits 0.

--token-file names a file holding mcpd's token instead of --token: it is
read again whenever it changes (looked at before each call), so that
short-lived tokens written there by another process need no restart.
--mcp-header 'Name: value' (repeatable) and --mcp-header-file (one such line
each, # comments) are sent with every request to an HTTP MCP server; a
server that answers 401 or 403 is up and counts as alive.

It exits 1 at once only when the first registration cannot work: a server
version that is not semantic (use --version) or a registration mcpd refuses
(bad input, token or scope). Logs go to stderr (--log-format, --log-level);
a stdio server's stderr is passed through.`,
		Example: `  mcpctl agent --module calendar --mcp http://127.0.0.1:3000/mcp
  MCPCTL_SERVER=https://mcpd.internal MCPCTL_TOKEN=$(cat /etc/mcpctl/token) \
      mcpctl agent --module everything --mcp-command "node /opt/everything/dist/index.js stdio"`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("traceparent") {
				opts.Traceparent = f.Getenv(EnvTraceparent)
			}
			if err := opts.complete(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return failed(agentRun(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Module, "module", "", "module name to register the server under")
	fl.StringVar(&opts.MCP, "mcp", "", "streamable HTTP URL of the MCP server")
	fl.StringVar(&opts.MCPCommand, "mcp-command", "", "command that runs the MCP server over stdio")
	fl.StringVar(&opts.Version, "version", "", "version to register instead of the server's serverInfo.version")
	fl.DurationVar(&opts.ProbeTimeout, "probe-timeout", agent.DefaultProbeTimeout, "how long a liveness probe may take")
	fl.DurationVar(&opts.ConnectTimeout, "connect-timeout", agent.DefaultConnectTimeout, "how long connecting (and starting a stdio server) may take")
	fl.DurationVar(&opts.DeregisterTimeout, "deregister-timeout", agent.DefaultDeregisterTimeout, "how long the deregistration at the end may take")
	fl.BoolVar(&opts.ProbeRevisions, "probe-revisions", true, "ask a server without server/discover about each other revision once (one initialize each)")
	fl.StringVar(&opts.LogFormat, "log-format", "text", "log format on stderr: text or json")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringVar(&opts.Traceparent, "traceparent", "", "W3C traceparent header for the registrations (env "+EnvTraceparent+")")
	fl.StringVar(&opts.TokenFile, "token-file", "", "file holding mcpd's token, read again when it changes (instead of --token)")
	opts.MCPHeaders.addFlags(cmd)
	_ = cmd.MarkFlagRequired("module")
	cmd.MarkFlagsOneRequired("mcp", "mcp-command")
	cmd.MarkFlagsMutuallyExclusive("mcp", "mcp-command")
	_ = cmd.MarkFlagFilename("token-file")
	_ = cmd.RegisterFlagCompletionFunc("log-format", fixedCompletions("text", "json"))
	_ = cmd.RegisterFlagCompletionFunc("log-level", fixedCompletions("debug", "info", "warn", "error"))
	return cmd
}

// complete checks the flags.
func (o *agentOptions) complete() error {
	if o.Module == "" {
		return usagef("--module is empty")
	}
	t, err := mcpTarget(o.MCP, o.MCPCommand, "mcp")
	if err != nil {
		return err
	}
	o.Target = t
	for name, d := range map[string]time.Duration{"probe-timeout": o.ProbeTimeout, "connect-timeout": o.ConnectTimeout, "deregister-timeout": o.DeregisterTimeout} {
		if d <= 0 {
			return usagef("invalid --%s %s: want more than 0", name, d)
		}
	}
	if o.LogFormat != "text" && o.LogFormat != "json" {
		return usagef("invalid --log-format %q: want text or json", o.LogFormat)
	}
	if err := o.Level.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return usagef("invalid --log-level %q: want debug, info, warn or error", o.LogLevel)
	}
	h, err := o.MCPHeaders.header(o.Target, "mcp", "mcp-command")
	if err != nil {
		return err
	}
	o.MCPHeader = h
	return nil
}

func agentRun(ctx context.Context, opts *agentOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	if opts.TokenFile != "" {
		tf := client.NewTokenFile(opts.TokenFile)
		if _, err := tf.Token(); err != nil {
			return err
		}
		c = c.WithTokenSource(tf)
	}
	// The logger and a stdio server's stderr share the stream.
	errOut := &lockedWriter{w: opts.IO.ErrOut}
	hopts := &slog.HandlerOptions{Level: opts.Level}
	var h slog.Handler = slog.NewTextHandler(errOut, hopts)
	if opts.LogFormat == "json" {
		h = slog.NewJSONHandler(errOut, hopts)
	}
	target := opts.Target
	target.Stderr = errOut
	aopts := agent.Options{
		Module:            opts.Module,
		Version:           opts.Version,
		Target:            target,
		Registry:          c,
		Traceparent:       opts.Traceparent,
		ProbeRevisions:    opts.ProbeRevisions,
		MCPHeader:         opts.MCPHeader,
		Logger:            slog.New(h),
		ProbeTimeout:      opts.ProbeTimeout,
		ConnectTimeout:    opts.ConnectTimeout,
		DeregisterTimeout: opts.DeregisterTimeout,
	}
	if opts.tune != nil {
		opts.tune(&aopts)
	}
	a, err := agent.New(aopts)
	if err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), "agent: "))
	}
	err = a.Run(ctx)
	var pe *agent.PermanentError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// lockedWriter serializes writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
