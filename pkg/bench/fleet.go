package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
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
		hc: &http.Client{Transport: NewTransport(), Timeout: 30 * time.Second}}
	now := time.Now()
	for t := 1; t <= tenants; t++ {
		tok, err := auth.Issue(secret, TenantID(t), "mcpd-bench", auth.ScopeRead+" "+auth.ScopeWrite, 2*time.Hour, now)
		if err != nil {
			return nil, fmt.Errorf("issue token: %w", err)
		}
		f.clients = append(f.clients, client.New(baseURL, tok, client.WithHTTPClient(f.hc)))
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
	_, err := f.clients[t-1].Heartbeat(ctx, id)
	return err
}

// HeartbeatGrouped is a load's op like Heartbeat, but successive calls go to
// successive servers of one tenant (servers 1, 2, ... in seed order), so
// that concurrent heartbeats share tenants.
func (f *Fleet) HeartbeatGrouped(ctx context.Context, seq int64) error {
	n := int(seq%int64(f.Tenants*f.Modules)) + 1
	_, err := f.clients[(n-1)/f.Modules].Heartbeat(ctx, ServerID(n))
	return err
}
