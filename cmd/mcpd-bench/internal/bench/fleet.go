package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
)

// Fleet is the seeded servers as their owners see them: one API client per
// tenant, with that tenant's token, all over one HTTP transport.
type Fleet struct {
	Tenants int
	Modules int
	clients []*client.Client
	hc      *http.Client
	// The heartbeat loads' own lean requests: the endpoint and each
	// tenant's Authorization header value.
	heartbeatURL string
	authz        [][]string
}

// NewTransport is a keep-alive HTTP/1.1 transport with room for an idle
// connection per worker, so that no load pays for new connections.
func NewTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
	}
}

// NewFleet returns the fleet of tenants x modules seeded servers at
// baseURL, with tokens signed by secret.
func NewFleet(baseURL string, secret []byte, tenants, modules int) (*Fleet, error) {
	f := &Fleet{Tenants: tenants, Modules: modules,
		hc:           &http.Client{Transport: NewTransport(), Timeout: 30 * time.Second},
		heartbeatURL: baseURL + "/v1/mcp/servers/heartbeat"}
	now := time.Now()
	for t := 1; t <= tenants; t++ {
		tok, err := auth.Issue(secret, TenantID(t), "mcpd-bench", auth.ScopeRead+" "+auth.ScopeWrite, 2*time.Hour, now)
		if err != nil {
			return nil, fmt.Errorf("issue token: %w", err)
		}
		f.clients = append(f.clients, client.New(baseURL, tok, client.WithHTTPClient(f.hc)))
		f.authz = append(f.authz, []string{"Bearer " + tok})
	}
	return f, nil
}

// NewTenantClient returns an API client of tenant at baseURL with a token
// signed by secret, on a transport of its own.
func NewTenantClient(baseURL string, secret []byte, tenant uuid.UUID) (*client.Client, error) {
	tok, err := auth.Issue(secret, tenant, "mcpd-bench", auth.ScopeRead+" "+auth.ScopeWrite, 2*time.Hour, time.Now())
	if err != nil {
		return nil, fmt.Errorf("issue token: %w", err)
	}
	hc := &http.Client{Transport: NewTransport(), Timeout: 30 * time.Second}
	return client.New(baseURL, tok, client.WithHTTPClient(hc)), nil
}

// Client is the API client of seeded tenant t (from 1).
func (f *Fleet) Client(t int) *client.Client { return f.clients[t-1] }

// Close closes the idle connections.
func (f *Fleet) Close() { f.hc.CloseIdleConnections() }

// spreadStride walks the servers so that successive calls go to servers
// of different tenants, as the heartbeats of independent servers arrive,
// and each server once per pass. It is prime, so coprime with any fleet
// size it does not divide.
const spreadStride = 7919

// Server returns the tenant (from 1) and id of the server that call seq
// heartbeats: every server once per pass over the fleet, successive calls
// on different tenants.
func (f *Fleet) Server(seq int64) (tenant int, id uuid.UUID) {
	total := int64(f.Tenants * f.Modules)
	stride := int64(spreadStride)
	if total%stride == 0 {
		stride = 1
	}
	n := int((seq*stride)%total) + 1
	return (n-1)/f.Modules + 1, ServerID(n)
}

// Heartbeat is the load's op: call seq heartbeats server Server(seq).
func (f *Fleet) Heartbeat(ctx context.Context, seq int64) error {
	t, id := f.Server(seq)
	return f.heartbeat(ctx, t, id)
}

// HeartbeatGrouped is a load's op like Heartbeat, but successive calls go to
// successive servers of one tenant (servers 1, 2, ... in seed order), so
// that concurrent heartbeats share tenants.
func (f *Fleet) HeartbeatGrouped(ctx context.Context, seq int64) error {
	n := int(seq%int64(f.Tenants*f.Modules)) + 1
	return f.heartbeat(ctx, (n-1)/f.Modules+1, ServerID(n))
}

// HeartbeatClient is Heartbeat through pkg/client, as a module's own
// program would send it (the answer decoded into a registry.Server).
func (f *Fleet) HeartbeatClient(ctx context.Context, seq int64) error {
	t, id := f.Server(seq)
	_, err := f.clients[t-1].Heartbeat(ctx, id)
	return err
}

var (
	jsonContentType = []string{"application/json"}
	healthyStatus   = []byte(`"status":"healthy"`)
	answerBuffers   = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// heartbeat is one heartbeat of server id of tenant t (from 1), as lean as
// a driver can send it on the machine it shares with mcpd: the request built
// by hand, the answer checked for 200 and a healthy server but not decoded.
func (f *Fleet) heartbeat(ctx context.Context, t int, id uuid.UUID) error {
	var body [52]byte // {"server_id":"<36>"}
	b := append(body[:0], `{"server_id":"`...)
	b = append(b, id.String()...)
	b = append(b, `"}`...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.heartbeatURL, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header = http.Header{"Authorization": f.authz[t-1], "Content-Type": jsonContentType}
	resp, err := f.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := answerBuffers.Get().(*bytes.Buffer)
	defer answerBuffers.Put(buf)
	buf.Reset()
	if _, err := io.Copy(buf, io.LimitReader(resp.Body, 1<<20)); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heartbeat of %s: %s: %s", id, resp.Status, bytes.TrimSpace(buf.Bytes()))
	}
	if !bytes.Contains(buf.Bytes(), healthyStatus) {
		return fmt.Errorf("heartbeat of %s: answer without a healthy status: %.200s", id, buf.Bytes())
	}
	return nil
}
