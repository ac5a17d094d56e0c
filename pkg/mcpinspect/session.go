package mcpinspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/version"
)

// Defaults of Options.
const (
	// DefaultTerminateGrace is how long a stdio server is given to exit at
	// each step of stopping it (closed input, SIGTERM, SIGKILL).
	DefaultTerminateGrace = 2 * time.Second
	// maxToolPages bounds the pages of tools/list one listing follows.
	maxToolPages = 1000
)

// newProtocolRevision is the first revision without initialize and ping,
// where server/discover takes their places.
const newProtocolRevision = "2026-07-28"

// methodDiscover is the request of revision 2026-07-28 that says what a
// server supports.
const methodDiscover = "server/discover"

// Options configure a connection.
type Options struct {
	// Logger receives the SDK's own log lines; nil: none.
	Logger *slog.Logger
	// OnToolsChanged is called on notifications/tools/list_changed, on the
	// SDK's goroutine: it must return at once (signal and return).
	OnToolsChanged func()
	// ProtocolVersion is the revision to ask for first; empty: the newest
	// the SDK knows.
	ProtocolVersion string
	// TerminateGrace: see DefaultTerminateGrace; zero means that default.
	TerminateGrace time.Duration
	// ClientName and ClientVersion are the clientInfo sent in the
	// handshake; empty: "mcpctl" and this build's version.
	ClientName, ClientVersion string
}

// Info is what the handshake told of the server.
type Info struct {
	// Name, Title and Version are its serverInfo.
	Name, Title, Version string
	// Protocol is the negotiated revision.
	Protocol string
	// Capabilities is its capabilities object as it sent it (compact JSON).
	Capabilities json.RawMessage
	// Instructions is its instructions text, if any.
	Instructions string
	// Discovered lists the revisions server/discover said the server
	// supports; nil when it has no server/discover.
	Discovered []string
}

// Tool is one tool of the server.
type Tool struct {
	Name        string
	Title       string
	Description string
}

// errClosed: the session ended because Close was called.
var errClosed = errors.New("closed")

// Session is an open connection to an MCP server. It is safe for concurrent
// use.
type Session struct {
	target Target
	cs     *mcp.ClientSession
	proc   *process // nil over HTTP
	info   Info

	idle      func() // closes the idle connections of the session's own transport
	done      chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	closing   bool
}

// Connect connects to the server, does the handshake (server/discover or
// initialize) and returns the open session. Over stdio it starts the
// command; closing the session stops it.
func Connect(ctx context.Context, t Target, opts Options) (*Session, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	name, ver := opts.ClientName, opts.ClientVersion
	if name == "" {
		name, ver = "mcpctl", version.Version
	}
	capt := &capture{}
	copts := &mcp.ClientOptions{
		Logger: opts.Logger,
		// A client that offers nothing: no roots, sampling or elicitation.
		Capabilities: &mcp.ClientCapabilities{},
	}
	if opts.OnToolsChanged != nil {
		notify := opts.OnToolsChanged
		copts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { notify() }
	}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: ver}, copts)

	s := &Session{target: t, done: make(chan struct{})}
	var transport mcp.Transport
	if t.Stdio() {
		grace := opts.TerminateGrace
		if grace <= 0 {
			grace = DefaultTerminateGrace
		}
		p, err := startProcess(t, grace)
		if err != nil {
			return nil, err
		}
		s.proc = p
		transport = captureTransport{Transport: &mcp.IOTransport{Reader: p, Writer: p}, cap: capt}
	} else {
		hc := t.HTTPClient
		if hc == nil {
			// A transport of the session's own, whose connections Close
			// closes.
			tr := http.DefaultTransport.(*http.Transport).Clone()
			s.idle = tr.CloseIdleConnections
			hc = &http.Client{Transport: tr}
		}
		next := hc.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		wrapped := *hc
		wrapped.Transport = captureRoundTripper{next: traceRoundTripper{next: next}, cap: capt}
		transport = &mcp.StreamableClientTransport{Endpoint: t.URL, HTTPClient: &wrapped}
	}

	var sopts *mcp.ClientSessionOptions
	if opts.ProtocolVersion != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: opts.ProtocolVersion}
	}
	cs, err := connect(ctx, client, transport, sopts, s.proc)
	capt.off.Store(true)
	if err != nil {
		if s.idle != nil {
			s.idle()
		}
		return nil, err
	}
	s.cs = cs
	go func() {
		_ = cs.Wait()
		close(s.done)
	}()
	ir := cs.InitializeResult()
	if ir == nil {
		_ = s.Close()
		return nil, fmt.Errorf("connect %s: no handshake result", t)
	}
	s.info = Info{Protocol: ir.ProtocolVersion, Instructions: ir.Instructions}
	if ir.ServerInfo != nil {
		s.info.Name, s.info.Title, s.info.Version = ir.ServerInfo.Name, ir.ServerInfo.Title, ir.ServerInfo.Version
	}
	newProto := ir.ProtocolVersion >= newProtocolRevision
	s.info.Capabilities = capt.capabilities(newProto)
	if s.info.Capabilities == nil {
		// Not seen on the wire (a transport this package does not watch):
		// the SDK's reading of it, without the members it does not know.
		caps := ir.Capabilities
		if caps == nil {
			caps = &mcp.ServerCapabilities{}
		}
		b, err := json.Marshal(caps)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("connect %s: encode capabilities: %w", t, err)
		}
		s.info.Capabilities = b
	}
	if vs, ok := capt.discoverVersions(); ok {
		s.info.Discovered = slices.Clone(vs)
	}
	return s, nil
}

// connect runs the SDK's handshake; a stdio server that exits during it is
// reported with how it ended and its stderr.
func connect(ctx context.Context, client *mcp.Client, tr mcp.Transport, sopts *mcp.ClientSessionOptions, proc *process) (*mcp.ClientSession, error) {
	type result struct {
		cs  *mcp.ClientSession
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cs, err := client.Connect(ctx, tr, sopts)
		ch <- result{cs, err}
	}()
	var exited <-chan struct{}
	if proc != nil {
		exited = proc.exited
	}
	var r result
	select {
	case r = <-ch:
	case <-exited:
		// The SDK notices the closed pipe too; wait for it to give up.
		r = <-ch
		if r.err == nil {
			_ = r.cs.Close()
			r.err = errors.New("the server exited")
		}
	}
	if r.err == nil {
		return r.cs, nil
	}
	err := r.err
	if proc != nil {
		_ = proc.Close()
		if perr := proc.exitError(); perr != nil {
			err = fmt.Errorf("%w (%v)", err, perr)
		} else if tail := proc.stderrTail(); tail != "" {
			err = fmt.Errorf("%w; its stderr ends: %s", err, tail)
		}
	}
	return nil, fmt.Errorf("connect: %w", err)
}

// Info returns what the handshake told of the server.
func (s *Session) Info() Info {
	info := s.info
	info.Capabilities = slices.Clone(s.info.Capabilities)
	info.Discovered = slices.Clone(s.info.Discovered)
	return info
}

// Target returns the target the session is connected to.
func (s *Session) Target() Target { return s.target }

// Tools lists every tool of the server, following nextCursor page after
// page.
func (s *Session) Tools(ctx context.Context) ([]Tool, error) {
	var (
		tools  []Tool
		cursor string
		seen   = map[string]bool{}
	)
	for range maxToolPages {
		res, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			title := t.Title
			if title == "" && t.Annotations != nil {
				title = t.Annotations.Title
			}
			tools = append(tools, Tool{Name: t.Name, Title: title, Description: t.Description})
		}
		if res.NextCursor == "" {
			return tools, nil
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("tools/list: the server returned cursor %q twice", res.NextCursor)
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxToolPages)
}

// Ping checks that the server answers: ping, or server/discover on
// revisions from 2026-07-28 on (which removed ping), with ctx's
// traceparent (WithTraceparent) in its _meta there. ctx bounds the wait.
func (s *Session) Ping(ctx context.Context) error {
	if err := s.exitError(); err != nil {
		return err
	}
	if s.info.Protocol >= newProtocolRevision {
		if _, err := mcp.CallCustomMethod[*mcp.DiscoverParams, *mcp.DiscoverResult](ctx, s.cs, methodDiscover,
			&mcp.DiscoverParams{Meta: traceMeta(ctx)}); err != nil {
			return fmt.Errorf("server/discover: %w", s.orExit(err))
		}
		return nil
	}
	if err := s.cs.Ping(ctx, nil); err != nil {
		return fmt.Errorf("ping: %w", s.orExit(err))
	}
	return nil
}

// orExit prefers how the process ended to the SDK's "connection closed".
func (s *Session) orExit(err error) error {
	if perr := s.exitError(); perr != nil {
		return perr
	}
	return err
}

func (s *Session) exitError() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.exitError()
}

// Done is closed when the connection ended: the server closed it, the
// stdio process exited, or Close was called.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended: how the process exited, or that the
// connection was closed; nil while it is open.
func (s *Session) Err() error {
	select {
	case <-s.done:
	default:
		return nil
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return errClosed
	}
	if err := s.exitError(); err != nil {
		return err
	}
	return mcp.ErrConnectionClosed
}

// Close ends the session; over stdio it stops the process (closed input,
// then SIGTERM, then SIGKILL). It is idempotent.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		if s.cs != nil {
			_ = s.cs.Close()
		}
		if s.proc != nil {
			_ = s.proc.Close()
		}
		if s.cs != nil {
			<-s.done
		}
		if s.idle != nil {
			s.idle()
		}
	})
	return nil
}
