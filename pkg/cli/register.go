package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/mcpinspect"
	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/registry"
)

// defaultMCPTimeout bounds learning what an MCP server says of itself.
const defaultMCPTimeout = 30 * time.Second

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
	Remotes          []string // --remote URL, repeatable
	RemoteType       string   // --remote-type, for every --remote
	Description      string
	Title            string
	ServerJSON       string // --server-json FILE

	// MCP is set when the registration is learned from an MCP server
	// (--from-mcp, --from-mcp-command).
	MCP *registerMCPOptions

	// Filled from the flags by the command before it runs.
	Capabilities json.RawMessage
	SkillInfos   []registry.SkillInfo
	RemoteList   []registry.Remote
	// set says which of --version, --description, --title and --remote
	// were given: they win over the server.json's.
	set map[string]bool
}

// registerMCPOptions name the MCP server a registration is learned from.
type registerMCPOptions struct {
	URL            string // streamable HTTP
	Command        string // stdio, one command line
	ProbeRevisions bool
	Timeout        time.Duration
	Headers        mcpHeaderOptions

	// Filled from the flags by the command before it runs.
	Target mcpinspect.Target
	Header http.Header
}

func newCmdRegister(f *Factory, runF func(*registerOptions) error) *cobra.Command {
	opts := &registerOptions{IO: f.IOStreams, Client: f.Client}
	src := &registerMCPOptions{}
	cmd := &cobra.Command{
		Use:   "register (--module NAME | --server-json FILE) (--version VERSION --protocol REVISION... | --from-mcp URL | --from-mcp-command CMD) [flags]",
		Short: "Register a server, or update its registration",
		Long: `Register an MCP server under the token's tenant. Registering a module that
is already registered updates that same server (same server ID): version,
protocols, capabilities and skills are replaced and it is healthy again.

The skills named with --skill are the server's complete set; skills not named
are removed. The trace id comes from --traceparent, else the TRACEPARENT
environment variable (W3C Trace Context), else mcpd makes one.

With --from-mcp URL (streamable HTTP) or --from-mcp-command CMD (stdio: the
command is split like a shell would, without one, and stopped afterwards),
mcpctl connects to the MCP server as a client and registers what it says of
itself: serverInfo.version (which must be a semantic version, unless
--version overrides it), the negotiated protocol revision and the others it
accepts (its server/discover answer, else one initialize per revision with
--probe-revisions), its capabilities object, and its tools as skills with
their descriptions (tools/list, every page; at most 256, names over 128
characters skipped with a warning). They replace --protocol, --capabilities
and --skill. --mcp-header 'Name: value' (repeatable) and --mcp-header-file
(one such line each, # comments) send headers to an HTTP server, as the
agent does: an MCP server that requires authorization answers 401 without
them, and the error then says to check --mcp-header.

--remote URL (repeatable) says where the server is reached, over streamable
HTTP, or over the older SSE transport with --remote-type sse; --description
and --title describe it (1-100 characters each). A registration replaces
them; none given registers none.

With --server-json FILE, the registration is read from an official MCP
registry server.json: the part of its name after the slash, lower-cased, is
the module name (it must be a valid module name), and its version,
description, title and remotes are registered; its packages are ignored.
--version, --description, --title and --remote given beside it win.
--protocol is still required: server.json does not list protocol revisions.`,
		Example: `  mcpctl register --module calendar --version 1.3.2 --protocol 2025-06-18
  mcpctl register --module calendar --version 1.3.2 --protocol 2025-06-18 \
      --capabilities caps.json --skill list-events="List the events of a day" --skill create-event
  mcpctl register --module calendar --version 1.3.2 --protocol 2025-06-18 \
      --remote https://calendar.example.com/mcp --title Calendar
  mcpctl register --server-json server.json --protocol 2025-11-25 --skill search
  mcpctl register --module calendar --from-mcp http://127.0.0.1:3000/mcp
  mcpctl register --module calendar --from-mcp https://calendar.internal/mcp \
      --mcp-header-file /etc/mcpctl/calendar.headers
  mcpctl register --module everything \
      --from-mcp-command "node /opt/everything/dist/index.js stdio"`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("traceparent") {
				opts.Traceparent = f.Getenv(EnvTraceparent)
			}
			opts.MCP = nil
			if src.URL != "" || src.Command != "" {
				opts.MCP = src
			} else if src.Headers.given() {
				return usagef("--mcp-header and --mcp-header-file are for an HTTP server (--from-mcp)")
			}
			opts.set = map[string]bool{}
			for _, name := range []string{"version", "description", "title", "remote"} {
				opts.set[name] = cmd.Flags().Changed(name)
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
	fl.StringArrayVar(&opts.Remotes, "remote", nil, "URL where the server is reached (repeatable)")
	fl.StringVar(&opts.RemoteType, "remote-type", registry.RemoteStreamableHTTP, "transport of every --remote: streamable-http or sse")
	fl.StringVar(&opts.Description, "description", "", "what the server does, 1-100 characters")
	fl.StringVar(&opts.Title, "title", "", "the server's display name, 1-100 characters")
	fl.StringVar(&opts.ServerJSON, "server-json", "", "read name, version, description, title and remotes from an official server.json")
	fl.StringVar(&src.URL, "from-mcp", "", "learn the registration from the MCP server at this streamable HTTP URL")
	fl.StringVar(&src.Command, "from-mcp-command", "", "learn the registration from the MCP server this command runs over stdio")
	fl.BoolVar(&src.ProbeRevisions, "probe-revisions", true, "with --from-mcp*: ask a server without server/discover about each other revision (one initialize each)")
	fl.DurationVar(&src.Timeout, "mcp-timeout", defaultMCPTimeout, "with --from-mcp*: how long learning from the MCP server may take")
	src.Headers.addFlags(cmd)
	cmd.MarkFlagsOneRequired("module", "server-json")
	cmd.MarkFlagsMutuallyExclusive("module", "server-json")
	_ = cmd.MarkFlagFilename("capabilities", "json")
	_ = cmd.MarkFlagFilename("server-json", "json")
	cmd.MarkFlagsMutuallyExclusive("from-mcp", "from-mcp-command")
	cmd.MarkFlagsMutuallyExclusive("server-json", "from-mcp")
	cmd.MarkFlagsMutuallyExclusive("server-json", "from-mcp-command")
	for _, src := range []string{"from-mcp", "from-mcp-command"} {
		for _, other := range []string{"protocol", "skill", "capabilities"} {
			cmd.MarkFlagsMutuallyExclusive(src, other)
		}
	}
	return cmd
}

// complete checks the flags and reads the capabilities file, the skills,
// the remotes and the server.json.
func (o *registerOptions) complete() error {
	if err := o.completeRemotes(); err != nil {
		return err
	}
	if o.ServerJSON != "" {
		if err := o.readServerJSON(); err != nil {
			return err
		}
	}
	if o.Module == "" {
		return usagef("--module is empty")
	}
	if o.MCP != nil {
		return o.MCP.complete()
	}
	// Required unless the registration is learned from an MCP server: the
	// error cobra gives for a required flag (bad usage, exit 2).
	var missing []string
	if len(o.Protocols) == 0 {
		missing = append(missing, `"protocol"`)
	}
	if o.Version == "" {
		missing = append(missing, `"version"`)
	}
	if len(missing) > 0 {
		return fmt.Errorf("required flag(s) %s not set", strings.Join(missing, ", "))
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
		o.SkillInfos = append(o.SkillInfos, registry.SkillInfo{Name: name, Description: desc})
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

// complete checks the MCP server's flags.
func (o *registerMCPOptions) complete() error {
	t, err := mcpTarget(o.URL, o.Command, "from-mcp")
	if err != nil {
		return err
	}
	if o.Timeout <= 0 {
		return usagef("invalid --mcp-timeout %s: want more than 0", o.Timeout)
	}
	o.Target = t
	if o.Header, err = o.Headers.header(t, "from-mcp", "from-mcp-command"); err != nil {
		return err
	}
	return nil
}

// mcpTarget makes the target of --PREFIX URL or --PREFIX-command CMD.
func mcpTarget(url, command, prefix string) (mcpinspect.Target, error) {
	var t mcpinspect.Target
	if command != "" {
		argv, err := mcpinspect.ParseCommand(command)
		if err != nil {
			return t, usagef("invalid --%s-command: %v", prefix, err)
		}
		t.Command = argv
	} else {
		t.URL = url
	}
	if err := t.Validate(); err != nil {
		return t, usagef("invalid --%s: %v", prefix, err)
	}
	return t, nil
}

// readCapabilities reads a JSON object from path ("-": in). A file that
// cannot be read, and content that is not a JSON object, are bad usage (2).
func readCapabilities(in io.Reader, path string) (json.RawMessage, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		if b, err = io.ReadAll(io.LimitReader(in, apiwire.MaxBodyBytes+1)); err != nil {
			return nil, usagef("--capabilities -: read stdin: %v", err)
		}
	} else if b, err = readFlagFile("capabilities", path, apiwire.MaxBodyBytes); err != nil {
		return nil, err
	}
	if len(b) > apiwire.MaxBodyBytes {
		return nil, usagef("capabilities %s: larger than %d bytes", path, apiwire.MaxBodyBytes)
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
	req := apiwire.RegisterRequest{
		ModuleName:              opts.Module,
		Version:                 opts.Version,
		SupportedProtocols:      opts.Protocols,
		CapabilityAdvertisement: opts.Capabilities,
		Skills:                  opts.SkillInfos,
	}
	if opts.MCP != nil {
		if req, err = learnFromMCP(ctx, opts); err != nil {
			return err
		}
	}
	req.Remotes = opts.RemoteList
	if opts.Description != "" {
		req.Description = &opts.Description
	}
	if opts.Title != "" {
		req.Title = &opts.Title
	}
	srv, created, err := c.Register(ctx, req, opts.Traceparent)
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

// learnFromMCP makes the registration from what the MCP server says of
// itself; warnings (tools left out) go to stderr.
func learnFromMCP(ctx context.Context, opts *registerOptions) (apiwire.RegisterRequest, error) {
	ictx, cancel := context.WithTimeout(ctx, opts.MCP.Timeout)
	defer cancel()
	target := opts.MCP.Target
	var tr *mcpinspect.HeaderTransport
	if !target.Stdio() {
		var closeIdle func()
		tr, closeIdle = mcpinspect.WithHeader(&target, opts.MCP.Header)
		defer closeIdle()
	}
	rep, err := mcpinspect.Inspect(ictx, target, mcpinspect.InspectOptions{ProbeRevisions: opts.MCP.ProbeRevisions})
	if err != nil {
		return apiwire.RegisterRequest{}, refusedHint(err, tr)
	}
	reg, err := rep.Registration(opts.Module, opts.Version)
	if err != nil {
		return apiwire.RegisterRequest{}, err
	}
	for _, w := range reg.Warnings {
		fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", w)
	}
	if opts.IO.errTTY() && !opts.Printer.Format.Structured() {
		others := slices.DeleteFunc(slices.Clone(rep.Protocols), func(p string) bool { return p == rep.Protocol })
		accepts := "no other revision known"
		if len(others) > 0 {
			accepts = "also accepts " + strings.Join(others, ", ")
		}
		fmt.Fprintf(opts.IO.ErrOut, "MCP server %s %s: protocol %s (%s; from %s), %d tools\n",
			rep.Name, rep.Version, rep.Protocol, accepts, rep.ProtocolsFrom, len(rep.Tools))
	}
	return reg.Request, nil
}
