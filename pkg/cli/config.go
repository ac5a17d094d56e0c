package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/cyberos/mcpd/pkg/output"
)

// Defaults of the global settings.
const (
	DefaultServer     = "http://127.0.0.1:8420"
	DefaultConfigPath = "~/.config/mcpctl/config.yaml"
)

// Environment variables mcpctl reads.
const (
	EnvServer      = "MCPCTL_SERVER"
	EnvToken       = "MCPCTL_TOKEN"
	EnvOutput      = "MCPCTL_OUTPUT"
	EnvConfig      = "MCPCTL_CONFIG"
	EnvDatabaseURL = "MCPCTL_DATABASE_URL"
	EnvTraceparent = "TRACEPARENT"
	// EnvCAFile, EnvClientCertFile and EnvClientKeyFile name the PEM files
	// of the TLS to mcpd: the CAs trusted to sign its certificate, and the
	// client certificate and key it may ask for (mTLS).
	EnvCAFile         = "MCPCTL_CA_FILE"
	EnvClientCertFile = "MCPCTL_CLIENT_CERT_FILE"
	EnvClientKeyFile  = "MCPCTL_CLIENT_KEY_FILE"
)

// Config is mcpctl's resolved configuration: flag, else environment, else
// file, else default.
type Config struct {
	// Server is the base URL of mcpd.
	Server string `mapstructure:"server"`
	// Token is the bearer token sent with every /v1 call.
	Token string `mapstructure:"token"`
	// Output is the output format.
	Output output.Format `mapstructure:"output"`
	// DatabaseURL is the PostgreSQL URL for migrate.
	DatabaseURL string `mapstructure:"database_url"`
	// CAFile holds the PEM certificates of the CAs that sign mcpd's
	// certificate; empty: the system's roots.
	CAFile string `mapstructure:"ca_file"`
	// ClientCertFile and ClientKeyFile, both or neither, are the client
	// certificate and key presented to an mcpd that asks for one (mTLS).
	ClientCertFile string `mapstructure:"client_cert_file"`
	ClientKeyFile  string `mapstructure:"client_key_file"`
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	u, err := url.Parse(c.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid server %q: want an http:// or https:// URL", c.Server)
	}
	if _, err := output.ParseFormat(string(c.Output)); err != nil {
		return err
	}
	if strings.ContainsAny(c.Token, " \t\r\n") {
		return errors.New("invalid token: contains white space")
	}
	if (c.ClientCertFile == "") != (c.ClientKeyFile == "") {
		return errors.New("--client-cert-file and --client-key-file: give both or neither")
	}
	return nil
}

// maxConfigBytes bounds what the config file may hold.
const maxConfigBytes = 1 << 20

// loadConfig resolves the configuration for cmd with a fresh viper
// instance: the flags of root (and cmd's --database-url), the environment,
// the config file and the defaults.
func loadConfig(root, cmd *cobra.Command) (*Config, error) {
	v := viper.New()
	binds := []struct{ key, env, flag string }{
		{"server", EnvServer, "server"},
		{"token", EnvToken, "token"},
		{"output", EnvOutput, "output"},
		{"database_url", EnvDatabaseURL, "database-url"},
		{"ca_file", EnvCAFile, "ca-file"},
		{"client_cert_file", EnvClientCertFile, "client-cert-file"},
		{"client_key_file", EnvClientKeyFile, "client-key-file"},
	}
	for _, b := range binds {
		if err := v.BindEnv(b.key, b.env); err != nil {
			return nil, err
		}
		fl := root.PersistentFlags().Lookup(b.flag)
		if fl == nil {
			fl = cmd.Flags().Lookup(b.flag)
		}
		if fl != nil {
			if err := v.BindPFlag(b.key, fl); err != nil {
				return nil, err
			}
		}
	}
	v.SetDefault("server", DefaultServer)
	v.SetDefault("output", string(output.Table))

	path, explicit := configPath(root)
	if path != "" {
		// The default file may be missing; one that is named, or one that
		// is there, must be readable (bad usage, as for every file a flag
		// names).
		_, statErr := os.Stat(path)
		if explicit || !errors.Is(statErr, fs.ErrNotExist) {
			b, err := readFlagFile("config", path, maxConfigBytes)
			if err != nil {
				return nil, err
			}
			v.SetConfigType("yaml")
			if err := v.ReadConfig(bytes.NewReader(b)); err != nil {
				return nil, fmt.Errorf("read config %s: %w", path, err)
			}
		}
	}
	known := make([]string, len(binds))
	for i, b := range binds {
		known[i] = b.key
	}
	for _, k := range v.AllKeys() {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("config %s: unknown key %q (known: %s)", path, k, strings.Join(known, ", "))
		}
	}
	var cfg Config
	if err := v.Unmarshal(&cfg); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// configPath is the config file to read and whether the user named it
// (then it must exist). An empty --config reads no file.
func configPath(root *cobra.Command) (string, bool) {
	fl := root.PersistentFlags().Lookup("config")
	path, explicit := DefaultConfigPath, false
	if fl != nil && fl.Changed {
		path, explicit = fl.Value.String(), true
	} else if env, ok := os.LookupEnv(EnvConfig); ok {
		path, explicit = env, true
	}
	return expandHome(path), explicit
}

func expandHome(path string) string {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, strings.TrimPrefix(path, "~"))
}
