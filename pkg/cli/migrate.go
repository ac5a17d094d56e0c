package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/schema"
)

// Migrator is the schema migration engine (pkg/schema in production).
type Migrator interface {
	Up(ctx context.Context, databaseURL string) error
	Down(ctx context.Context, databaseURL string, steps int) error
	Current(ctx context.Context, databaseURL string) (schema.Status, error)
}

// schemaMigrator runs pkg/schema.
type schemaMigrator struct{}

func (schemaMigrator) Up(ctx context.Context, url string) error { return schema.Up(ctx, url) }
func (schemaMigrator) Down(ctx context.Context, url string, steps int) error {
	return schema.Down(ctx, url, steps)
}
func (schemaMigrator) Current(ctx context.Context, url string) (schema.Status, error) {
	return schema.Current(ctx, url)
}

type migrateOptions struct {
	IO       *IOStreams
	Printer  *output.Printer
	Migrator Migrator

	DatabaseURL string
	// Steps is the number of migrations down reverts; 0 with All.
	Steps int
	All   bool
	// VersionOnly prints the applied version alone (migrate version).
	VersionOnly bool
}

func newCmdMigrate(f *Factory) *cobra.Command {
	cmd := newGroupCmd("migrate", "Migrate the PostgreSQL schema of mcpd")
	cmd.Long = `Migrate the PostgreSQL schema of mcpd with the migrations embedded in this
binary. Run it with a role that may create tables and roles (the owner of the
database), never with mcpd's own login role; afterwards
"GRANT cyberos_app TO <login role>" is the only grant mcpd needs.

The database URL comes from --database-url, else MCPCTL_DATABASE_URL, else
the config file's database_url.`
	cmd.PersistentFlags().String("database-url", "", "PostgreSQL URL, e.g. postgres://owner@127.0.0.1:5432/mcpd (env "+EnvDatabaseURL+")")
	cmd.AddCommand(
		newCmdMigrateUp(f, nil),
		newCmdMigrateDown(f, nil),
		newCmdMigrateStatus(f, "status", nil),
		newCmdMigrateStatus(f, "version", nil),
	)
	return cmd
}

// completeMigrate fills the options shared by the migrate verbs.
func completeMigrate(f *Factory, opts *migrateOptions) error {
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return usagef("no database URL: set --database-url or %s", EnvDatabaseURL)
	}
	if err := checkDatabaseURL(cfg.DatabaseURL); err != nil {
		return err
	}
	opts.DatabaseURL = cfg.DatabaseURL
	opts.Printer = f.printer()
	return nil
}

// checkDatabaseURL refuses, as bad usage, a database URL that PostgreSQL's
// client cannot parse: a postgres://, postgresql:// or pgx5:// URL or a
// libpq key=value string. The message does not repeat the URL, which may
// hold a password.
func checkDatabaseURL(raw string) error {
	if err := schema.ValidateURL(raw); err != nil {
		return usagef("invalid database URL (--database-url, %s or the config file's database_url): "+
			"want postgres://USER@HOST:PORT/DATABASE or libpq key=value pairs", EnvDatabaseURL)
	}
	return nil
}

func newMigrateOptions(f *Factory) *migrateOptions {
	return &migrateOptions{IO: f.IOStreams, Migrator: schemaMigrator{}}
}

func newCmdMigrateUp(f *Factory, runF func(*migrateOptions) error) *cobra.Command {
	opts := newMigrateOptions(f)
	return &cobra.Command{
		Use:     "up",
		Short:   "Apply every migration not applied yet",
		Example: `  mcpctl migrate up --database-url postgres://mcpd_owner@127.0.0.1:5432/mcpd`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := completeMigrate(f, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return failed(onDatabase(migrateUpRun(cmd.Context(), opts)))
		},
	}
}

func migrateUpRun(ctx context.Context, opts *migrateOptions) error {
	if err := opts.Migrator.Up(ctx, opts.DatabaseURL); err != nil {
		return err
	}
	return migrateStatusRun(ctx, opts)
}

func newCmdMigrateDown(f *Factory, runF func(*migrateOptions) error) *cobra.Command {
	opts := newMigrateOptions(f)
	cmd := &cobra.Command{
		Use:   "down [N]",
		Short: "Revert the last N migrations (--all: every one)",
		Long: `Revert the last N applied migrations. Reverting every migration drops
mcpd's tables and their data: it needs --all, or a "yes" typed on a terminal.`,
		Example: `  mcpctl migrate down 1 --database-url postgres://mcpd_owner@127.0.0.1:5432/mcpd
  mcpctl migrate down --all`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("%s takes at most one argument N, got %d", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Steps = 0
			if len(args) == 1 {
				if opts.All {
					return usagef("give N or --all, not both")
				}
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 {
					return usagef("invalid N %q: want a positive number of migrations", args[0])
				}
				opts.Steps = n
			} else if !opts.All {
				if !opts.IO.inTTY() || !opts.IO.errTTY() {
					return usagef("reverting every migration needs --all (or give N)")
				}
			}
			if err := completeMigrate(f, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return failed(onDatabase(migrateDownRun(cmd.Context(), opts)))
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "revert every migration (drops all of mcpd's data)")
	return cmd
}

// errNotConfirmed: the operator did not confirm reverting every migration.
var errNotConfirmed = errors.New("not confirmed: nothing reverted")

func migrateDownRun(ctx context.Context, opts *migrateOptions) error {
	if opts.Steps == 0 && !opts.All {
		fmt.Fprint(opts.IO.ErrOut, "Revert every migration and drop all of mcpd's data? Type yes: ")
		line, _ := bufio.NewReader(opts.IO.In).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return errNotConfirmed
		}
	}
	if err := opts.Migrator.Down(ctx, opts.DatabaseURL, opts.Steps); err != nil {
		return err
	}
	return migrateStatusRun(ctx, opts)
}

// migrateStatus is the JSON and YAML form of migrate status.
type migrateStatus struct {
	Version uint `json:"version"`
	Latest  uint `json:"latest"`
	Dirty   bool `json:"dirty"`
	Applied bool `json:"applied"`
	Pending uint `json:"pending"`
	// Engine is postgresql, or citus (the tables distributed by tenant).
	Engine string `json:"engine"`
}

func newCmdMigrateStatus(f *Factory, use string, runF func(*migrateOptions) error) *cobra.Command {
	opts := newMigrateOptions(f)
	cmd := &cobra.Command{
		Use:   use,
		Short: "Show the applied version, the latest this build knows, and dirtiness",
		Long: `Show the migration state of the database: the version applied (0 when
none is), the latest version this build knows, how many are pending, and
whether a migration was left dirty (it must be repaired by hand).`,
		Example: `  mcpctl migrate status --database-url postgres://mcpd_owner@127.0.0.1:5432/mcpd`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := completeMigrate(f, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return failed(onDatabase(migrateStatusRun(cmd.Context(), opts)))
		},
	}
	if use == "version" {
		opts.VersionOnly = true
		cmd.Short = "Print the applied schema version alone (0 when none is)"
		cmd.Long = `Print the version of the last migration applied, alone on a line (0 when
none is), for scripts. -o json and -o yaml print the same object as status.`
	}
	return cmd
}

func migrateStatusRun(ctx context.Context, opts *migrateOptions) error {
	st, err := opts.Migrator.Current(ctx, opts.DatabaseURL)
	if err != nil {
		return err
	}
	ms := migrateStatus{Version: st.Version, Latest: st.Latest, Dirty: st.Dirty, Applied: st.Applied, Engine: st.Engine}
	if ms.Engine == "" {
		ms.Engine = schema.EnginePostgreSQL
	}
	if !st.Applied {
		ms.Version = 0
	}
	if ms.Latest > ms.Version {
		ms.Pending = ms.Latest - ms.Version
	}
	if opts.VersionOnly && !opts.Printer.Format.Structured() {
		_, err := fmt.Fprintln(opts.Printer.Out, ms.Version)
		return err
	}
	return opts.Printer.Object(ms, []output.KV{
		{Label: "Applied version", Key: "version", Value: output.Uint(ms.Version)},
		{Label: "Latest version", Key: "latest", Value: output.Uint(ms.Latest)},
		{Label: "Pending", Key: "pending", Value: output.Uint(ms.Pending)},
		{Label: "Dirty", Key: "dirty", Value: strconv.FormatBool(ms.Dirty)},
		{Label: "Engine", Key: "engine", Value: ms.Engine},
	})
}
