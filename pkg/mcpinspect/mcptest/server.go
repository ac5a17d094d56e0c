package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PingMode is how a test server answers its liveness requests (ping and
// server/discover).
type PingMode string

// Ping modes.
const (
	PingOK   PingMode = "ok"   // answer
	PingFail PingMode = "fail" // answer with an error
	PingHang PingMode = "hang" // never answer (until the request is cancelled)
)

// Tool is a tool of a test server.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Config describes a test server.
type Config struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Protocols narrows the revisions the server speaks; nil: every one the
	// SDK knows.
	Protocols []string `json:"protocols,omitempty"`
	// PageSize is how many tools one tools/list page holds; 0: the SDK's.
	PageSize int `json:"page_size,omitempty"`
	// NoDiscover answers server/discover with "method not found", as a
	// server from before revision 2026-07-28 does (over HTTP only: the
	// SDK's server answers it before any middleware, so ServeHTTP does).
	NoDiscover bool     `json:"no_discover,omitempty"`
	Ping       PingMode `json:"ping,omitempty"`
	Tools      []Tool   `json:"tools"`
	// ExitAtStart, when not 0, makes a stdio server exit with this status
	// right after it started (a crash at start).
	ExitAtStart int `json:"exit_at_start,omitempty"`
}

// Server is a test MCP server.
type Server struct {
	MCP *mcp.Server

	mu     sync.Mutex
	ping   PingMode
	tools  []Tool
	closed chan struct{}
	once   sync.Once
	probes atomic.Int64

	noDiscover bool
}

// NewServer returns a server as cfg says.
func NewServer(cfg Config) *Server {
	s := &Server{closed: make(chan struct{}), ping: cfg.Ping, noDiscover: cfg.NoDiscover}
	if s.ping == "" {
		s.ping = PingOK
	}
	s.MCP = mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Version: cfg.Version}, &mcp.ServerOptions{
		SupportedProtocolVersions: cfg.Protocols,
		PageSize:                  cfg.PageSize,
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		Instructions:              "A test server of mcpd.",
	})
	s.MCP.AddReceivingMiddleware(s.liveness)
	s.SetTools(cfg.Tools...)
	return s
}

// liveness answers ping and server/discover as the ping mode says.
func (s *Server) liveness(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "ping" && method != "server/discover" {
			return next(ctx, method, req)
		}
		s.probes.Add(1)
		switch s.PingMode() {
		case PingFail:
			return nil, errors.New("mcptest: liveness set to fail")
		case PingHang:
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-s.closed:
				return nil, errors.New("mcptest: closed")
			}
		}
		return next(ctx, method, req)
	}
}

// SetPing sets how liveness requests are answered from now on.
func (s *Server) SetPing(m PingMode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ping = m
}

// PingMode returns how liveness requests are answered.
func (s *Server) PingMode() PingMode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ping
}

// Probes counts the liveness requests the server got.
func (s *Server) Probes() int64 { return s.probes.Load() }

// SetTools makes tools the server's whole tool list: tools not named are
// removed, new ones added (descriptions updated). Connected clients get
// notifications/tools/list_changed.
func (s *Server) SetTools(tools ...Tool) {
	s.mu.Lock()
	old := s.tools
	s.tools = slices.Clone(tools)
	s.mu.Unlock()
	var gone []string
	for _, o := range old {
		if !slices.ContainsFunc(tools, func(t Tool) bool { return t.Name == o.Name }) {
			gone = append(gone, o.Name)
		}
	}
	if len(gone) > 0 {
		s.MCP.RemoveTools(gone...)
	}
	for _, t := range tools {
		if slices.Contains(old, t) {
			continue
		}
		s.MCP.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
}

// Close releases hanging liveness requests and closes every session.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closed) })
	for ss := range s.MCP.Sessions() {
		_ = ss.Close()
	}
}

// HTTPOptions configure ServeHTTP.
type HTTPOptions struct {
	// Stateless serves the sessionless protocol (revision 2026-07-28).
	Stateless bool
	// Wrap, when set, stands in front of the MCP handler.
	Wrap func(http.Handler) http.Handler
}

// ServeHTTP serves s over streamable HTTP on 127.0.0.1 until the test ends
// and returns the endpoint URL.
func ServeHTTP(t testing.TB, s *Server, o HTTPOptions) string {
	t.Helper()
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP },
		&mcp.StreamableHTTPOptions{Stateless: o.Stateless})
	if s.noDiscover {
		h = noDiscover(h)
	}
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		s.Close()
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL + "/mcp"
}

// noDiscover answers a POST of server/discover with "method not found".
func noDiscover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "server/discover" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, msg.ID)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}
