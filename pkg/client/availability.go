package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/registry"
)

func windowQuery(w registry.AvailabilityWindow) url.Values {
	q := url.Values{}
	setNonZero(q, "window", string(w))
	return q
}

// ServerAvailability returns what a server delivered over a window (empty:
// the server's default, 24h).
func (c *Client) ServerAvailability(ctx context.Context, serverID uuid.UUID, w registry.AvailabilityWindow) (registry.Availability, error) {
	var a registry.Availability
	_, err := c.do(ctx, "server availability", http.MethodGet, "/v1/mcp/servers/"+serverID.String()+"/availability", windowQuery(w), nil, &a, nil)
	return a, err
}

// SkillAvailability returns what a skill name delivered over a window.
func (c *Client) SkillAvailability(ctx context.Context, name string, w registry.AvailabilityWindow) (registry.Availability, error) {
	var a registry.Availability
	_, err := c.do(ctx, "skill availability", http.MethodGet, "/v1/mcp/skills/"+url.PathEscape(name)+"/availability", windowQuery(w), nil, &a, nil)
	return a, err
}

// AvailabilityRatios returns the available share of a window of each of
// the servers ids, asking for at most registry.MaxAvailabilityRatios at a
// time; servers the tenant does not have are left out.
func (c *Client) AvailabilityRatios(ctx context.Context, ids []uuid.UUID, w registry.AvailabilityWindow) (map[uuid.UUID]registry.AvailabilityRatio, error) {
	out := make(map[uuid.UUID]registry.AvailabilityRatio, len(ids))
	for start := 0; start < len(ids); start += registry.MaxAvailabilityRatios {
		chunk := ids[start:min(start+registry.MaxAvailabilityRatios, len(ids))]
		s := make([]string, len(chunk))
		for i, id := range chunk {
			s[i] = id.String()
		}
		q := windowQuery(w)
		q.Set("server_ids", strings.Join(s, ","))
		var list apiwire.AvailabilityList
		if _, err := c.do(ctx, "availability ratios", http.MethodGet, "/v1/mcp/availability", q, nil, &list, nil); err != nil {
			return nil, err
		}
		for _, r := range list.Servers {
			out[r.ServerID] = r
		}
	}
	return out, nil
}
