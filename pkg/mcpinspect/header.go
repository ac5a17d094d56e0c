package mcpinspect

import (
	"net/http"
	"sync/atomic"
)

// HeaderTransport sends every HTTP request to an MCP server with the
// configured headers (credentials, say), and counts the answers 401 and
// 403, so that a caller can tell a server that refuses its credentials
// from one that is down.
type HeaderTransport struct {
	next   http.RoundTripper
	header http.Header
	denied atomic.Int64
}

// RoundTrip sends req with the headers, which replace any of the same name.
func (t *HeaderTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range t.header {
			req.Header.Del(k)
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		t.denied.Add(1)
	}
	return resp, err
}

// Denied is how many answers 401 or 403 the server gave so far.
func (t *HeaderTransport) Denied() int64 { return t.denied.Load() }

// WithHeader gives an HTTP target a client whose transport is a
// HeaderTransport with header over the target's own transport (a fresh one
// when it has none, whose idle connections closeIdle closes).
func WithHeader(t *Target, header http.Header) (tr *HeaderTransport, closeIdle func()) {
	var hc http.Client
	if t.HTTPClient != nil {
		hc = *t.HTTPClient
	}
	next := hc.Transport
	closeIdle = func() {}
	if next == nil {
		own := http.DefaultTransport.(*http.Transport).Clone()
		next, closeIdle = own, own.CloseIdleConnections
	}
	tr = &HeaderTransport{next: next, header: header.Clone()}
	hc.Transport = tr
	t.HTTPClient = &hc
	return tr, closeIdle
}
