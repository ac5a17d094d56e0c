package mcpinspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxCaptureBytes bounds what is buffered of one response body while
// looking for the handshake's answer.
const maxCaptureBytes = 1 << 20

// capture keeps the capabilities objects of the handshake's answers as the
// server wrote them: the SDK decodes them into its own struct, which drops
// the members it does not know (such as "tasks").
type capture struct {
	off atomic.Bool // set once the handshake is over

	mu             sync.Mutex
	initialize     json.RawMessage // capabilities of the initialize result
	discover       json.RawMessage // capabilities of the server/discover result
	discoverResult []string        // supportedVersions of the server/discover result
	discovered     bool
}

// observe looks at one JSON-RPC result.
func (c *capture) observe(result json.RawMessage) {
	if c.off.Load() || len(result) == 0 || result[0] != '{' {
		return
	}
	var r struct {
		ProtocolVersion   *string         `json:"protocolVersion"`
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
	}
	if json.Unmarshal(result, &r) != nil || len(r.Capabilities) == 0 || r.Capabilities[0] != '{' {
		return
	}
	var compact bytes.Buffer
	if json.Compact(&compact, r.Capabilities) != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case r.SupportedVersions != nil && c.discover == nil:
		c.discover = compact.Bytes()
		c.discoverResult = r.SupportedVersions
		c.discovered = true
	case r.ProtocolVersion != nil && c.initialize == nil:
		c.initialize = compact.Bytes()
	}
}

// observeError looks at one JSON-RPC error: the answer "unsupported
// protocol version" to server/discover lists the revisions the server
// supports.
func (c *capture) observeError(code int64, data json.RawMessage) {
	if c.off.Load() || code != mcp.CodeUnsupportedProtocolVersion || len(data) == 0 {
		return
	}
	var d mcp.UnsupportedProtocolVersionData
	if json.Unmarshal(data, &d) != nil || len(d.Supported) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.discovered {
		c.discoverResult, c.discovered = d.Supported, true
	}
}

// observeMessage looks at one JSON-RPC message as it was on the wire.
func (c *capture) observeMessage(raw []byte) {
	if c.off.Load() {
		return
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int64           `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	if m.Error != nil {
		c.observeError(m.Error.Code, m.Error.Data)
		return
	}
	c.observe(m.Result)
}

// capabilities returns the raw capabilities of the answer that set the
// negotiated revision; nil when neither was seen.
func (c *capture) capabilities(newProtocol bool) json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if newProtocol && c.discover != nil {
		return c.discover
	}
	if c.initialize != nil {
		return c.initialize
	}
	return c.discover
}

// discoverVersions returns the revisions server/discover listed, and
// whether it answered at all.
func (c *capture) discoverVersions() ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.discoverResult, c.discovered
}

// captureTransport wraps a stdio transport so that capture sees every
// response. (Only stdio: the SDK's HTTP connection has unexported methods
// a wrapper would hide; HTTP is captured by captureRoundTripper.)
type captureTransport struct {
	mcp.Transport
	cap *capture
}

func (t captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &captureConn{Connection: conn, cap: t.cap}, nil
}

type captureConn struct {
	mcp.Connection
	cap *capture
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		var werr *jsonrpc.Error
		if errors.As(resp.Error, &werr) {
			c.cap.observeError(werr.Code, werr.Data)
		} else if resp.Error == nil {
			c.cap.observe(resp.Result)
		}
	}
	return msg, err
}

// captureRoundTripper lets capture read the bodies of the answers to POSTs
// (JSON or an SSE stream) while the SDK reads them, so that the handshake's
// answer is seen before the SDK acts on it.
type captureRoundTripper struct {
	next http.RoundTripper
	cap  *capture
}

func (rt captureRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || rt.cap.off.Load() || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &captureBody{rc: resp.Body, cap: rt.cap}
	case "text/event-stream":
		resp.Body = &captureBody{rc: resp.Body, cap: rt.cap, sse: true}
	}
	return resp, nil
}

// captureBody passes a body through, handing each complete JSON-RPC
// message in it to capture.
type captureBody struct {
	rc   io.ReadCloser
	cap  *capture
	sse  bool
	buf  []byte
	data []byte // the SSE event being read
	full bool   // past maxCaptureBytes: stop looking
}

func (b *captureBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if b.full || b.cap.off.Load() {
		return n, err
	}
	b.buf = append(b.buf, p[:n]...)
	if len(b.buf) > maxCaptureBytes {
		b.full, b.buf, b.data = true, nil, nil
		return n, err
	}
	if b.sse {
		b.scanEvents()
	} else if err == io.EOF {
		b.cap.observeMessage(b.buf)
		b.buf = nil
	}
	return n, err
}

// scanEvents takes the complete lines of buf: data lines gather into an
// event, which a blank line ends.
func (b *captureBody) scanEvents() {
	for {
		i := bytes.IndexByte(b.buf, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimSuffix(b.buf[:i], []byte("\r"))
		b.buf = b.buf[i+1:]
		switch {
		case len(line) == 0:
			if len(b.data) > 0 {
				b.cap.observeMessage(b.data)
			}
			b.data = b.data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if len(b.data) > 0 {
				b.data = append(b.data, '\n')
			}
			b.data = append(b.data, d...)
		}
	}
}

func (b *captureBody) Close() error { return b.rc.Close() }
