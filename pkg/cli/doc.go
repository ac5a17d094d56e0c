// Package cli holds mcpctl's commands.
//
// It follows cli/cli: a Factory carries the streams, the resolved
// configuration and a lazy API client; each verb has an options struct, a
// newCmdX(f, runF) constructor that parses flags into it, and an xRun(ctx,
// opts) that does the work. Tests either capture the parsed options through
// runF or call xRun with test streams.
//
// Main runs the command tree and turns its outcome into an exit code: 0 on
// success, 1 when a call failed (the API problem's title and detail on
// stderr), 2 on bad usage (an unknown command or flag, a missing or invalid
// argument, a bad --output value).
//
// Configuration: --server, --token and --output (and --database-url for
// migrate) come from the flag, else from MCPCTL_SERVER, MCPCTL_TOKEN,
// MCPCTL_OUTPUT and MCPCTL_DATABASE_URL, else from the YAML file named by
// --config (default ~/.config/mcpctl/config.yaml; keys server, token,
// output, database_url), else from the default. One viper instance per root
// command resolves them in its PersistentPreRunE.
package cli
