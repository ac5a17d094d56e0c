package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
)

// targetAvailabilityListP99 bounds the 24 h ratios of a list of 100
// servers (the board's and servers list -o wide's one call per page).
const targetAvailabilityListP99 = 10 * time.Millisecond

// AvailabilityList times GET /v1/mcp/availability for the 24 h ratios of
// the first page (at most 100) of a tenant's servers, one call at a time,
// for d (at most maxCalls).
func AvailabilityList(ctx context.Context, c *client.Client, d time.Duration, maxCalls int64) (LoadResult, int, error) {
	list, err := c.Servers(ctx, client.ListServersParams{Limit: registry.MaxAvailabilityRatios})
	if err != nil {
		return LoadResult{}, 0, err
	}
	ids := make([]uuid.UUID, len(list.Servers))
	for i, s := range list.Servers {
		ids[i] = s.ServerID
	}
	res := ClosedLoop(ctx, 1, d, maxCalls, func(ctx context.Context, _ int64) error {
		ratios, err := c.AvailabilityRatios(ctx, ids, registry.Window24h)
		if err == nil && len(ratios) != len(ids) {
			err = fmt.Errorf("availability: %d ratios, want %d", len(ratios), len(ids))
		}
		return err
	})
	return res, len(ids), nil
}
