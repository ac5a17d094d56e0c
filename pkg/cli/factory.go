package cli

import (
	"errors"
	"os"
	"sync"
	"time"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/version"
)

// Factory carries what every command needs: streams, the clock, the
// environment, the resolved configuration and a lazy API client.
type Factory struct {
	IOStreams *IOStreams
	// Now is the clock for ages and token times.
	Now func() time.Time
	// Getenv reads an environment variable (NO_COLOR, TRACEPARENT).
	Getenv func(string) string
	// Config returns the configuration resolved from flags, environment,
	// file and defaults; an error before the root command has parsed them.
	Config func() (*Config, error)
	// Client returns the API client for the configured server and token,
	// made on first use.
	Client func() (*client.Client, error)

	cfg *Config
}

// errNoConfig: Config was called before the flags were parsed.
var errNoConfig = errors.New("configuration not loaded")

// NewFactory returns a Factory over streams with the system clock and
// environment.
func NewFactory(streams *IOStreams) *Factory {
	f := &Factory{
		IOStreams: streams,
		Now:       time.Now,
		Getenv:    os.Getenv,
	}
	f.Config = func() (*Config, error) {
		if f.cfg == nil {
			return nil, errNoConfig
		}
		return f.cfg, nil
	}
	var (
		once sync.Once
		c    *client.Client
		err  error
	)
	f.Client = func() (*client.Client, error) {
		once.Do(func() {
			var cfg *Config
			if cfg, err = f.Config(); err != nil {
				return
			}
			c, err = newClient(cfg)
		})
		return c, err
	}
	return f
}

// newClient returns the API client of cfg: its server and token, over TLS
// with its CA and client certificate files when it names any.
func newClient(cfg *Config) (*client.Client, error) {
	opts := []client.Option{client.WithUserAgent("mcpctl/" + version.Version)}
	files := client.TLSFiles{CAFile: cfg.CAFile, CertFile: cfg.ClientCertFile, KeyFile: cfg.ClientKeyFile}
	if !files.Empty() {
		tr, err := client.NewTLSTransport(files)
		if err != nil {
			return nil, &UsageError{Err: err}
		}
		opts = append(opts, client.WithTransport(tr))
	}
	return client.New(cfg.Server, cfg.Token, opts...), nil
}

// format is the resolved output format; table before configuration.
func (f *Factory) format() output.Format {
	if f.cfg == nil || f.cfg.Output == "" {
		return output.Table
	}
	return f.cfg.Output
}

// printer returns a Printer on the factory's streams in the resolved format.
func (f *Factory) printer() *output.Printer {
	tty := f.IOStreams.outTTY()
	return &output.Printer{
		Out:      f.IOStreams.Out,
		ErrOut:   f.IOStreams.ErrOut,
		Format:   f.format(),
		Terminal: tty,
		Color:    output.ColorEnabled(tty, f.Getenv),
		Now:      f.Now,
	}
}
