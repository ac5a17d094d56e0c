package mcpinspect

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HeaderTraceparent is the W3C Trace Context header.
const HeaderTraceparent = "traceparent"

// traceparentKey keeps a request's traceparent in its context.
type traceparentKey struct{}

// WithTraceparent returns ctx whose requests to the MCP server carry tp, a
// W3C traceparent: over HTTP as the traceparent header, and on revisions
// from 2026-07-28 on also in the request's _meta (SEP-414), where stdio
// servers read it too. An empty tp changes nothing.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return context.WithValue(ctx, traceparentKey{}, tp)
}

// traceparentOf returns the traceparent WithTraceparent put in ctx.
func traceparentOf(ctx context.Context) string {
	tp, _ := ctx.Value(traceparentKey{}).(string)
	return tp
}

// traceMeta is the _meta of a request made in ctx: its traceparent, if any.
func traceMeta(ctx context.Context) mcp.Meta {
	if tp := traceparentOf(ctx); tp != "" {
		return mcp.Meta{HeaderTraceparent: tp}
	}
	return nil
}

// traceRoundTripper sets the traceparent header of each request whose
// context has one.
type traceRoundTripper struct{ next http.RoundTripper }

func (rt traceRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if tp := traceparentOf(req.Context()); tp != "" && req.Header.Get(HeaderTraceparent) == "" {
		req = req.Clone(req.Context())
		req.Header.Set(HeaderTraceparent, tp)
	}
	return rt.next.RoundTrip(req)
}
