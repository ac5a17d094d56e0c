package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"

	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/version"
)

// Exit codes of the mcpd command.
const (
	ExitOK      = 0
	ExitFailure = 1 // the daemon failed to start or to serve
	ExitUsage   = 2 // bad flags, environment or config file
)

// keyConfig is the flag (and MCPD_CONFIG) naming the YAML config file.
const keyConfig = "config"

// maxConfigFileBytes bounds the config file.
const maxConfigFileBytes = 1 << 20

// usageError is a bad flag, variable or config value: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// RunFunc runs the daemon with a validated configuration.
type RunFunc func(ctx context.Context, cfg config.Config) error

// Main runs the mcpd command line with args (without the program name) and
// returns its exit code. ctx ending (SIGTERM, SIGINT in main) stops the
// daemon cleanly: exit 0. prepare, when not nil, gets the validated
// configuration before the daemon starts, for the settings of the whole
// process that belong to cmd/mcpd (the garbage collector's).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, prepare func(config.Config)) int {
	return MainReload(ctx, args, stdout, stderr, nil, prepare)
}

// MainReload is Main whose daemon reloads its TLS files at each value
// received on reload (SIGHUP in main).
func MainReload(ctx context.Context, args []string, stdout, stderr io.Writer, reload <-chan os.Signal, prepare func(config.Config)) int {
	cmd := newCommand(stdout, stderr, func(ctx context.Context, cfg config.Config) error {
		if prepare != nil {
			prepare(cfg)
		}
		return runDaemon(ctx, cfg, stdout, stderr, reload)
	}, reload)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(stderr, "mcpd: %s\n", line)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "Run 'mcpd --help' for usage.")
		return ExitUsage
	}
	return ExitFailure
}

// NewCommand returns the mcpd root command. runF, when not nil, receives the
// validated configuration instead of a daemon being run (tests).
func NewCommand(stdout, stderr io.Writer, runF RunFunc) *cobra.Command {
	return newCommand(stdout, stderr, runF, nil)
}

func newCommand(stdout, stderr io.Writer, runF RunFunc, reload <-chan os.Signal) *cobra.Command {
	if runF == nil {
		runF = func(ctx context.Context, cfg config.Config) error { return runDaemon(ctx, cfg, stdout, stderr, reload) }
	}
	cmd := &cobra.Command{
		Use:   "mcpd",
		Short: "mcpd: the registry of MCP servers and their health",
		Long: `mcpd keeps the registry of a platform's MCP servers: they register, heartbeat and
deregister over its HTTP API; its monitor marks silent servers degraded, then
unhealthy (their skills unavailable), and every transition is audited.

Every flag is also an environment variable MCPD_<FLAG> (dashes to underscores)
and a key of the YAML file given by --config. A flag beats the environment,
which beats the file, which beats the default.`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &usageError{fmt.Errorf("unexpected argument %q: mcpd takes flags only", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(cmd.Flags(), os.LookupEnv)
			if err != nil {
				return &usageError{err}
			}
			if err := cfg.Validate(); err != nil {
				return &usageError{err}
			}
			return runF(cmd.Context(), cfg)
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetVersionTemplate("mcpd {{.Version}}\n")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	AddFlags(cmd.Flags())
	return cmd
}

// AddFlags defines every setting of config.Settings on fs, with its
// default from config.Default, and --config.
func AddFlags(fs *pflag.FlagSet) {
	d := config.Default()
	fs.String(keyConfig, "", "YAML config file whose keys are the flag names (env MCPD_CONFIG)")
	for _, st := range config.Settings {
		switch def := st.Field(&d).(type) {
		case *string:
			fs.String(st.Name, *def, st.Usage)
		case *bool:
			fs.Bool(st.Name, *def, st.Usage)
		case *time.Duration:
			fs.Duration(st.Name, *def, st.Usage)
		case *float64:
			fs.Float64(st.Name, *def, st.Usage)
		case *int:
			fs.Int(st.Name, *def, st.Usage)
		case *[]string:
			fs.StringSlice(st.Name, *def, st.Usage)
		default:
			panic(fmt.Sprintf("config setting %s: no flag of type %T", st.Name, def))
		}
	}
}

// LoadConfig reads the configuration from fs (parsed flags, defined by
// AddFlags), the MCPD_* variables that lookupEnv finds and the --config
// file: flag beats env beats file beats default. It does not validate.
func LoadConfig(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) (config.Config, error) {
	// Flags and the file go through viper; the variables are looked up
	// through lookupEnv (os.LookupEnv in mcpd), so that tests need not
	// touch the process environment.
	v := viper.New()
	env := map[string]string{}
	for _, st := range config.Settings {
		if err := v.BindPFlag(st.Name, fs.Lookup(st.Name)); err != nil {
			return config.Config{}, fmt.Errorf("bind --%s: %w", st.Name, err)
		}
		if val, ok := lookupEnv(config.EnvName(st.Name)); ok && val != "" {
			env[st.Name] = val
		}
	}

	path, _ := fs.GetString(keyConfig)
	pathFrom := "--" + keyConfig
	if !fs.Changed(keyConfig) {
		if p, ok := lookupEnv(config.EnvName(keyConfig)); ok && p != "" {
			path, pathFrom = p, config.EnvName(keyConfig)
		}
	}
	if path != "" {
		if err := readConfigFile(v, path); err != nil {
			return config.Config{}, fmt.Errorf("%s %s: %w", pathFrom, path, err)
		}
	}

	r := reader{v: v, fs: fs, env: env, file: path}
	var cfg config.Config
	for _, st := range config.Settings {
		switch f := st.Field(&cfg).(type) {
		case *string:
			*f = r.string(st.Name)
		case *bool:
			*f = r.bool(st.Name)
		case *time.Duration:
			*f = r.duration(st.Name)
		case *float64:
			*f = r.float(st.Name)
		case *int:
			*f = r.int(st.Name)
		case *[]string:
			*f = r.strings(st.Name)
		}
	}
	if !r.set(config.KeyMonitorPeriod) {
		cfg.MonitorPeriod = config.DefaultMonitorPeriodFor(cfg.HeartbeatInterval)
	}
	if !r.set(config.KeyHeartbeatFlushInterval) {
		cfg.HeartbeatFlushInterval = config.DefaultHeartbeatFlushIntervalFor(cfg.HeartbeatInterval)
	}
	return cfg, errors.Join(r.errs...)
}

// readConfigFile loads a YAML file into v, refusing keys that are not
// settings (a typo must not pass for a default).
func readConfigFile(v *viper.Viper, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFileBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxConfigFileBytes {
		return fmt.Errorf("larger than %d bytes", maxConfigFileBytes)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	var unknown []string
	for k := range doc {
		if _, ok := config.Lookup(k); !ok {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unknown keys %s (keys are the flag names, like heartbeat-interval)", strings.Join(unknown, ", "))
	}
	// Parsed once: viper takes the document as read.
	if err := v.MergeConfigMap(doc); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}

// reader turns the raw values of v into typed ones, collecting an error
// that names the source of each bad value.
//
// It is not viper's Unmarshal (mapstructure with decode hooks), which was
// weighed for it and does not fit: Unmarshal decodes the merged settings,
// so an error cannot name where a bad value came from (--heartbeat-interval,
// MCPD_HEARTBEAT_INTERVAL or heartbeat-interval in the file), which every
// message here does; the variables come through lookupEnv, not the process
// environment that viper's env layer reads (the tests run in parallel), so
// they never enter viper; and its decoding is looser than a setting must
// be: a YAML 10 decodes into a Duration of 10ns (a duration needs a unit
// here), and viper's weakly typed input turns alertmanager-url: [1] into
// ["1"] (a list of strings is required). Hooks that fixed each would be
// this code again, behind mapstructure's error wrapping.
type reader struct {
	v    *viper.Viper
	fs   *pflag.FlagSet
	env  map[string]string
	file string
	errs []error
}

// raw returns the value of key by precedence, and where it came from.
func (r *reader) raw(key string) (any, string) {
	if r.fs.Changed(key) {
		return r.v.Get(key), "--" + key
	}
	if val, ok := r.env[key]; ok {
		return val, config.EnvName(key)
	}
	if r.v.InConfig(key) {
		return r.v.Get(key), key + " in " + r.file
	}
	return r.v.Get(key), "--" + key
}

// set reports whether key was given at all: by flag, variable or file.
func (r *reader) set(key string) bool {
	_, inEnv := r.env[key]
	return r.fs.Changed(key) || inEnv || r.v.InConfig(key)
}

func (r *reader) fail(src, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", src, fmt.Sprintf(format, args...)))
}

func (r *reader) string(key string) string {
	val, src := r.raw(key)
	switch s := val.(type) {
	case nil:
		return ""
	case string:
		return s
	default:
		r.fail(src, "want a string, got %v", val)
		return ""
	}
}

func (r *reader) bool(key string) bool {
	val, src := r.raw(key)
	switch b := val.(type) {
	case nil:
		return false
	case bool:
		return b
	case string:
		parsed, err := strconv.ParseBool(strings.TrimSpace(b))
		if err != nil {
			r.fail(src, "%q is not a boolean (true or false)", b)
		}
		return parsed
	default:
		r.fail(src, "want true or false, got %v", val)
		return false
	}
}

func (r *reader) duration(key string) time.Duration {
	val, src := r.raw(key)
	s, ok := val.(string)
	if !ok {
		r.fail(src, "want a duration with a unit, like 10s or 500ms; got %v", val)
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		r.fail(src, "%q is not a duration (like 10s or 500ms)", s)
		return 0
	}
	return d
}

func (r *reader) strings(key string) []string {
	val, src := r.raw(key)
	var parts []string
	switch x := val.(type) {
	case nil:
	case string:
		parts = strings.Split(x, ",")
	case []string:
		parts = x
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				r.fail(src, "want a list of strings, got %v", e)
				return nil
			}
			parts = append(parts, strings.Split(s, ",")...)
		}
	default:
		r.fail(src, "want a list of strings, got %v", val)
		return nil
	}
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// runDaemon runs mcpd until ctx ends, logging as cfg says to stderr.
func runDaemon(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, reload <-chan os.Signal) error {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	var h slog.Handler = slog.NewJSONHandler(stderr, opts)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(stderr, opts)
	}
	logger := slog.New(h)
	d, err := New(cfg, Options{Logger: logger, Stdout: stdout, Reload: reload})
	if err != nil {
		return err
	}
	if err := d.Run(ctx); err != nil {
		logger.Error("mcpd failed", "err", err)
		var ce *connectionLimitError
		if errors.As(err, &ce) {
			return &usageError{err}
		}
		return err
	}
	return nil
}

func (r *reader) float(key string) float64 {
	val, src := r.raw(key)
	switch x := val.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			r.fail(src, "%q is not a number", x)
		}
		return f
	default:
		r.fail(src, "want a number, got %v", val)
		return 0
	}
}

func (r *reader) int(key string) int {
	val, src := r.raw(key)
	switch x := val.(type) {
	case int:
		return x
	case float64:
		if x != float64(int(x)) {
			r.fail(src, "%v is not a whole number", x)
		}
		return int(x)
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil {
			r.fail(src, "%q is not a whole number", x)
		}
		return n
	default:
		r.fail(src, "want a whole number, got %v", val)
		return 0
	}
}
