package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/version"
)

// annotationSkipConfig marks commands that need no configuration (version,
// completion): a broken config file does not stop them.
const annotationSkipConfig = "mcpctl/skip-config"

// Main runs mcpctl with args (without the program name) on streams and
// returns the exit code: 0 success, 1 a failed call, 2 bad usage.
func Main(ctx context.Context, args []string, streams *IOStreams) int {
	return run(ctx, NewFactory(streams), args)
}

func run(ctx context.Context, f *Factory, args []string) int {
	root := NewRootCmd(f)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	printError(f.IOStreams, cmd, err)
	server := ""
	if f.cfg != nil {
		server = f.cfg.Server
	}
	if h := hint(err, server); h != "" {
		fmt.Fprintln(f.IOStreams.ErrOut, h)
	}
	if client.UntrustedCertificate(err) {
		fmt.Fprintf(f.IOStreams.ErrOut, "mcpd's certificate is not trusted: give the CA that signed it with --ca-file (or %s).\n", EnvCAFile)
	}
	return exitCode(err)
}

// printError writes err on stderr as people read it: a problem's title and
// detail, and for bad usage a hint at the command's help.
func printError(io *IOStreams, cmd *cobra.Command, err error) {
	var silent *silentError
	if errors.As(err, &silent) {
		return
	}
	var p *apiwire.Problem
	switch {
	case errors.As(err, &p):
		fmt.Fprintf(io.ErrOut, "Error: %s\n", p.Error())
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(io.ErrOut, "Error: interrupted")
	default:
		fmt.Fprintf(io.ErrOut, "Error: %s\n", err)
	}
	if exitCode(err) == ExitUsage && cmd != nil {
		fmt.Fprintf(io.ErrOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
}

// NewRootCmd returns the mcpctl command tree over f.
func NewRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "mcpctl",
		Short: "Operate an mcpd registry of MCP servers",
		Long: `mcpctl operates an mcpd registry of MCP servers: it registers servers and
sends their heartbeats, lists them and their skills, reads the audit trail,
migrates the database, issues tokens and watches the fleet live.

Settings come from the flag, else the environment (MCPCTL_SERVER,
MCPCTL_TOKEN, MCPCTL_OUTPUT, MCPCTL_CA_FILE, MCPCTL_CLIENT_CERT_FILE,
MCPCTL_CLIENT_KEY_FILE), else the config file (keys server, token, output,
ca_file, client_cert_file, client_key_file), else the default.

Over https, --ca-file names the CAs trusted to sign mcpd's certificate (the
system's otherwise), and --client-cert-file with --client-key-file the
certificate presented to an mcpd that asks for one (mTLS).

Output: on a terminal, tables with a header; piped, tab-separated rows
without a header or colour and times in RFC 3339; -o json and -o yaml print
the API's own objects (an object for one server, an array for a list).

Exit status: 0 success, 1 a failed call (the problem is printed on stderr),
2 bad usage.`,
		Version:       version.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("mcpctl {{.Version}}\n")
	root.SetIn(f.IOStreams.In)
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)
	root.CompletionOptions.DisableDefaultCmd = true
	root.DisableAutoGenTag = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &UsageError{Err: err}
	})

	pf := root.PersistentFlags()
	pf.String("server", DefaultServer, "base URL of mcpd (env "+EnvServer+")")
	pf.String("token", "", "bearer token for the API (env "+EnvToken+")")
	pf.StringP("output", "o", string(output.Table), "output format: "+output.FormatNames()+" (env "+EnvOutput+")")
	pf.String("config", DefaultConfigPath, "config file with keys server, token, output, ca_file, client_cert_file, client_key_file (env "+EnvConfig+")")
	pf.String("ca-file", "", "PEM file of the CAs that sign mcpd's certificate; default the system's (env "+EnvCAFile+")")
	pf.String("client-cert-file", "", "PEM client certificate for an mcpd that asks for one, mTLS (env "+EnvClientCertFile+")")
	pf.String("client-key-file", "", "PEM private key of --client-cert-file (env "+EnvClientKeyFile+")")
	_ = root.RegisterFlagCompletionFunc("output", fixedCompletions(formatNames()...))
	for _, name := range []string{"ca-file", "client-cert-file", "client-key-file"} {
		_ = root.MarkPersistentFlagFilename(name)
	}

	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if skipConfig(cmd) {
			return nil
		}
		cfg, err := loadConfig(root, cmd)
		if err != nil {
			return &UsageError{Err: err}
		}
		f.cfg = cfg
		return nil
	}

	root.AddGroup(
		&cobra.Group{ID: "servers", Title: "Servers:"},
		&cobra.Group{ID: "ops", Title: "Operations:"},
	)
	for _, c := range []*cobra.Command{
		newCmdRegister(f, nil),
		newCmdHeartbeat(f, nil),
		newCmdDeregister(f, nil),
		newCmdServers(f),
		newCmdList(f, nil),
		newCmdAudit(f),
		newCmdSkills(f),
	} {
		c.GroupID = "servers"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{
		newCmdAgent(f, nil),
		newCmdWatch(f, nil),
		newCmdSimulate(f, nil),
		newCmdMigrate(f),
		newCmdToken(f),
	} {
		c.GroupID = "ops"
		root.AddCommand(c)
	}
	root.AddCommand(newCmdCompletion(f), newCmdVersion(f, nil))
	return root
}

func skipConfig(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if _, ok := c.Annotations[annotationSkipConfig]; ok {
			return true
		}
	}
	return false
}

// newGroupCmd returns a command that only holds subcommands: alone it
// prints its help, with an unknown subcommand it is bad usage, with the
// subcommands whose names are close ("did you mean", as cobra says for the
// root's own, which it does not for a command below the root).
func newGroupCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		// cobra's distance for the root's suggestions.
		SuggestionsMinimumDistance: 2,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
				}
				return usagef("%s", msg)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
}

// exactArgs requires exactly the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			if len(names) == 0 {
				return usagef("%s takes no arguments, got %q", cmd.CommandPath(), strings.Join(args, " "))
			}
			return usagef("%s needs %s, got %d argument(s)", cmd.CommandPath(), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

func formatNames() []string {
	names := make([]string, len(output.Formats))
	for i, f := range output.Formats {
		names[i] = string(f)
	}
	return names
}

// fixedCompletions completes a flag or argument from a fixed list.
func fixedCompletions(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}
