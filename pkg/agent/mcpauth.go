package agent

import (
	"net/http"
	"sync/atomic"

	"github.com/cyberos/mcpd/pkg/mcpinspect"
)

// mcpTransport sends every HTTP request to the MCP server with the
// configured headers, and counts the answers 401 and 403: a server that
// refuses the agent's credentials is up all the same.
type mcpTransport struct {
	next   http.RoundTripper
	header http.Header
	denied atomic.Int64
}

func (t *mcpTransport) RoundTrip(req *http.Request) (*http.Response, error) {
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

// wrapHTTPTarget gives an HTTP target a client whose transport is an
// mcpTransport over the target's own (a fresh one when it has none, whose
// idle connections closeIdle closes).
func wrapHTTPTarget(t *mcpinspect.Target, header http.Header) (tr *mcpTransport, closeIdle func()) {
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
	tr = &mcpTransport{next: next, header: header.Clone()}
	hc.Transport = tr
	t.HTTPClient = &hc
	return tr, closeIdle
}

// deniedCount is how many answers 401 or 403 the MCP server gave so far.
func (a *Agent) deniedCount() int64 {
	if a.mcpTr == nil {
		return 0
	}
	return a.mcpTr.denied.Load()
}
