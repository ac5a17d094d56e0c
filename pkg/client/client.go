package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/version"
)

// Limits of the client's own transport.
const (
	// MaxIdleConnsPerHost keeps a connection per concurrent caller alive, so
	// that thousands of simulated servers reuse their connections.
	MaxIdleConnsPerHost = 8192
	// DefaultTimeout bounds one call when the context has no deadline.
	DefaultTimeout = 30 * time.Second
	// maxResponseBytes bounds what the client reads of an answer.
	maxResponseBytes = 64 << 20
	// maxDetailBytes bounds the detail synthesized from a non-problem body.
	maxDetailBytes = 512
)

// Client calls one mcpd with one bearer token. It is safe for concurrent use.
type Client struct {
	base      string
	token     string
	hc        *http.Client
	userAgent string
	tokens    TokenSource // when set, gives the token of each call instead
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a client of the mcpd at baseURL (e.g. http://127.0.0.1:8420)
// that sends token as its bearer token (none when empty).
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{
		base:      strings.TrimRight(baseURL, "/"),
		token:     token,
		userAgent: "mcpd-client/" + version.Version,
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: newTransport(), Timeout: DefaultTimeout}
	}
	return c
}

// newTransport is http.DefaultTransport's configuration with room for many
// idle connections to the one host.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0, // no limit across hosts
		MaxIdleConnsPerHost:   MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// CloseIdleConnections closes the connections the client keeps open.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Register registers a server (or re-registers it) and returns it; created
// is true for a new server (201). A non-empty traceparent is sent as the W3C
// traceparent header and becomes the server's trace id.
func (c *Client) Register(ctx context.Context, req apiwire.RegisterRequest, traceparent string) (registry.Server, bool, error) {
	var srv registry.Server
	var hdr http.Header
	if traceparent != "" {
		hdr = http.Header{apiwire.HeaderTraceparent: []string{traceparent}}
	}
	status, err := c.do(ctx, "register", http.MethodPost, "/v1/mcp/servers/register", nil, req, &srv, hdr)
	if err != nil {
		return registry.Server{}, false, err
	}
	return srv, status == http.StatusCreated, nil
}

// Heartbeat records a heartbeat of the server.
func (c *Client) Heartbeat(ctx context.Context, serverID uuid.UUID) (registry.Server, error) {
	var srv registry.Server
	_, err := c.do(ctx, "heartbeat", http.MethodPost, "/v1/mcp/servers/heartbeat", nil,
		apiwire.ServerIDRequest{ServerID: serverID.String()}, &srv, nil)
	return srv, err
}

// Deregister deregisters the server; it is idempotent.
func (c *Client) Deregister(ctx context.Context, serverID uuid.UUID) (registry.Server, error) {
	var srv registry.Server
	_, err := c.do(ctx, "deregister", http.MethodPost, "/v1/mcp/servers/deregister", nil,
		apiwire.ServerIDRequest{ServerID: serverID.String()}, &srv, nil)
	return srv, err
}

// Server returns one server.
func (c *Client) Server(ctx context.Context, serverID uuid.UUID) (registry.Server, error) {
	var srv registry.Server
	_, err := c.do(ctx, "get server", http.MethodGet, "/v1/mcp/servers/"+serverID.String(), nil, nil, &srv, nil)
	return srv, err
}

// ListServersParams filters and pages GET /v1/mcp/servers; zero values are
// left out.
type ListServersParams struct {
	Status     string
	ModuleName string
	Limit      int
	Cursor     string
}

func (p ListServersParams) query() url.Values {
	q := url.Values{}
	setNonZero(q, "status", p.Status)
	setNonZero(q, "module_name", p.ModuleName)
	setNonZero(q, "cursor", p.Cursor)
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return q
}

// Servers returns one page of servers, ordered by module name.
func (c *Client) Servers(ctx context.Context, p ListServersParams) (apiwire.ServerList, error) {
	var list apiwire.ServerList
	_, err := c.do(ctx, "list servers", http.MethodGet, "/v1/mcp/servers", p.query(), nil, &list, nil)
	return list, err
}

// AllServers returns every server that p selects, following the cursors
// from p.Cursor on.
func (c *Client) AllServers(ctx context.Context, p ListServersParams) ([]registry.Server, error) {
	var all []registry.Server
	seen := map[string]bool{}
	for {
		page, err := c.Servers(ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Servers...)
		if page.NextCursor == nil {
			return all, nil
		}
		if seen[*page.NextCursor] {
			return nil, errors.New("list servers: the server returned a cursor twice")
		}
		seen[*page.NextCursor] = true
		p.Cursor = *page.NextCursor
	}
}

// Skills returns the skills of one server.
func (c *Client) Skills(ctx context.Context, serverID uuid.UUID) ([]registry.Skill, error) {
	var list apiwire.SkillList
	_, err := c.do(ctx, "list skills", http.MethodGet, "/v1/mcp/servers/"+serverID.String()+"/skills", nil, nil, &list, nil)
	return list.Skills, err
}

// ListEventsParams filters and pages GET /v1/mcp/audit; zero values are
// left out.
type ListEventsParams struct {
	ServerID   string
	ModuleName string
	Kind       string
	Limit      int
	Cursor     string
}

func (p ListEventsParams) query() url.Values {
	q := url.Values{}
	setNonZero(q, "server_id", p.ServerID)
	setNonZero(q, "module_name", p.ModuleName)
	setNonZero(q, "kind", p.Kind)
	setNonZero(q, "cursor", p.Cursor)
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return q
}

// Events returns one page of the audit trail in commit order.
func (c *Client) Events(ctx context.Context, p ListEventsParams) (apiwire.EventList, error) {
	var list apiwire.EventList
	_, err := c.do(ctx, "list audit events", http.MethodGet, "/v1/mcp/audit", p.query(), nil, &list, nil)
	return list, err
}

// Healthz reports whether the mcpd process is alive.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, "healthz", http.MethodGet, "/healthz", nil, nil, nil, nil)
	return err
}

// Readyz reports whether mcpd is ready: its store answers at the expected
// schema version.
func (c *Client) Readyz(ctx context.Context) error {
	_, err := c.do(ctx, "readyz", http.MethodGet, "/readyz", nil, nil, nil, nil)
	return err
}

func setNonZero(q url.Values, key, value string) {
	if value != "" {
		q.Set(key, value)
	}
}

// do sends one request and decodes a 2xx answer into out (when not nil). A
// non-2xx answer is an *apiwire.Problem; a failure to send or read is wrapped
// with op.
func (c *Client) do(ctx context.Context, op, method, path string, query url.Values, in, out any, hdr http.Header) (int, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("%s: encode request: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if in != nil {
		req.Header.Set("Content-Type", apiwire.ContentTypeJSON)
	}
	req.Header.Set("Accept", apiwire.ContentTypeJSON+", "+apiwire.ContentTypeProblem)
	token := c.token
	if c.tokens != nil {
		if token, err = c.tokens.Token(); err != nil {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s: read answer: %w", op, err)
	}
	if len(b) > maxResponseBytes {
		return resp.StatusCode, fmt.Errorf("%s: answer larger than %d bytes", op, maxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, problemFrom(resp, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: decode answer: %w", op, err)
		}
	}
	return resp.StatusCode, nil
}

// problemFrom returns the problem a non-2xx answer carries, or one made up
// from its status and body when it carries none.
func problemFrom(resp *http.Response, body []byte) *apiwire.Problem {
	p := &apiwire.Problem{}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	isJSON := mt == apiwire.ContentTypeProblem || mt == apiwire.ContentTypeJSON
	if !isJSON || json.Unmarshal(body, p) != nil || (p.Title == "" && p.Type == "") {
		detail := strings.TrimSpace(string(body))
		if len(detail) > maxDetailBytes {
			detail = detail[:maxDetailBytes] + "…"
		}
		p = &apiwire.Problem{Type: "about:blank", Title: http.StatusText(resp.StatusCode), Detail: detail}
	}
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	p.Status = resp.StatusCode
	p.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return p
}

// retryAfter parses a Retry-After header: delay seconds or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
