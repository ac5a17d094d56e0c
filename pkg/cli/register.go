package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/heartbeat"
	"github.com/cyberos/mcpd/pkg/output"
)

type registerOptions struct {
	IO      *IOStreams
	Client  func() (*client.Client, error)
	Printer *output.Printer

	Module           string
	Version          string
	Protocols        []string
	CapabilitiesFile string
	Skills           []string
	Traceparent      string

	// Filled from the flags by the command before it runs.
	Capabilities json.RawMessage
	SkillInfos   []heartbeat.SkillInfo
}

func newCmdRegister(f *Factory, runF func(*registerOptions) error) *cobra.Command {
	opts := &registerOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "register --module NAME --version VERSION --protocol REVISION... [flags]",
		Short: "Register a server, or update its registration",
		Long: `Register an MCP server under the token's tenant. Registering a module that
is already registered updates that same server (same server ID): version,
protocols, capabilities and skills are replaced and it is healthy again.

The skills named with --skill are the server's complete set; skills not named
are removed. The trace id comes from --traceparent, else the TRACEPARENT
environment variable (W3C Trace Context), else mcpd makes one.`,
		Example: `  mcpctl register --module calendar --version 1.3.2 --protocol 2025-06-18
  mcpctl register --module calendar --version 1.3.2 --protocol 2025-06-18 \
      --capabilities caps.json --skill list-events="List the events of a day" --skill create-event`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("traceparent") {
				opts.Traceparent = f.Getenv(EnvTraceparent)
			}
			if err := opts.complete(); err != nil {
				return err
			}
			opts.Printer = f.printer()
			if runF != nil {
				return runF(opts)
			}
			return failed(registerRun(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Module, "module", "", "module name: 1-63 of [a-z0-9-], starting with a letter")
	fl.StringVar(&opts.Version, "version", "", "semantic version of the server")
	fl.StringSliceVar(&opts.Protocols, "protocol", nil, "supported MCP revision, YYYY-MM-DD (repeatable)")
	fl.StringVar(&opts.CapabilitiesFile, "capabilities", "", "file with the capability advertisement, a JSON object (- for stdin)")
	fl.StringArrayVar(&opts.Skills, "skill", nil, "skill as NAME or NAME=DESCRIPTION (repeatable)")
	fl.StringVar(&opts.Traceparent, "traceparent", "", "W3C traceparent header for the registration (env "+EnvTraceparent+")")
	_ = cmd.MarkFlagRequired("module")
	_ = cmd.MarkFlagRequired("version")
	_ = cmd.MarkFlagRequired("protocol")
	_ = cmd.MarkFlagFilename("capabilities", "json")
	return cmd
}

// complete checks the flags and reads the capabilities file and skills.
func (o *registerOptions) complete() error {
	if o.Module == "" {
		return usagef("--module is empty")
	}
	if o.Version == "" {
		return usagef("--version is empty")
	}
	for _, p := range o.Protocols {
		if strings.TrimSpace(p) == "" {
			return usagef("--protocol is empty")
		}
	}
	o.SkillInfos = nil
	for _, s := range o.Skills {
		name, desc, _ := strings.Cut(s, "=")
		if name = strings.TrimSpace(name); name == "" {
			return usagef("invalid --skill %q: want NAME or NAME=DESCRIPTION", s)
		}
		o.SkillInfos = append(o.SkillInfos, heartbeat.SkillInfo{Name: name, Description: desc})
	}
	o.Capabilities = nil
	if o.CapabilitiesFile != "" {
		caps, err := readCapabilities(o.IO.In, o.CapabilitiesFile)
		if err != nil {
			return err
		}
		o.Capabilities = caps
	}
	return nil
}

// readCapabilities reads a JSON object from path ("-": in). A missing file
// fails (1); content that is not a JSON object is bad usage (2).
func readCapabilities(in io.Reader, path string) (json.RawMessage, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(in, api.MaxBodyBytes+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read capabilities: %w", err)
	}
	if len(b) > api.MaxBodyBytes {
		return nil, usagef("capabilities %s: larger than %d bytes", path, api.MaxBodyBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, usagef("capabilities %s: not a JSON object", path)
	}
	if dec.More() {
		return nil, usagef("capabilities %s: more than one JSON value", path)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, usagef("capabilities %s: %v", path, err)
	}
	return compact.Bytes(), nil
}

func registerRun(ctx context.Context, opts *registerOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	srv, created, err := c.Register(ctx, api.RegisterRequest{
		ModuleName:              opts.Module,
		Version:                 opts.Version,
		SupportedProtocols:      opts.Protocols,
		CapabilityAdvertisement: opts.Capabilities,
		Skills:                  opts.SkillInfos,
	}, opts.Traceparent)
	if err != nil {
		return err
	}
	if opts.IO.errTTY() && !opts.Printer.Format.Structured() {
		what := "Updated registration of"
		if created {
			what = "Registered new server"
		}
		fmt.Fprintf(opts.IO.ErrOut, "%s %s (%s)\n", what, srv.ModuleName, srv.ServerID)
	}
	return opts.Printer.Server(srv)
}
