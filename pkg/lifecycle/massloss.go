package lifecycle

import (
	"context"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// massLosses is, of one sweep's events, the tenants whose unhealthy share
// is above share with at least `least` servers.
func massLosses(ctx context.Context, counter registry.LiveCounter, events []registry.Event, share float64, least int) ([]registry.MassLoss, error) {
	byTenant := make(map[uuid.UUID]int)
	for _, ev := range events {
		if ev.Kind == registry.KindUnhealthy {
			byTenant[ev.TenantID]++
		}
	}
	var tenants []uuid.UUID
	for t, n := range byTenant {
		if n >= least {
			tenants = append(tenants, t)
		}
	}
	if len(tenants) == 0 {
		return nil, nil
	}
	live, err := counter.LiveCounts(ctx, tenants)
	if err != nil {
		return nil, err
	}
	var out []registry.MassLoss
	for _, t := range tenants {
		n := byTenant[t]
		if float64(n) > share*float64(live[t]) {
			out = append(out, registry.MassLoss{TenantID: t, Unhealthy: n, Live: live[t]})
		}
	}
	return out, nil
}
