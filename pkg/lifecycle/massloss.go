package lifecycle

import (
	"context"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// MassLoss is a tenant of which more than the set share of live servers
// went unhealthy in one sweep.
type MassLoss struct {
	TenantID  uuid.UUID
	Unhealthy int   // servers that went unhealthy in this sweep
	Live      int64 // servers of the tenant that are not deregistered
}

// Defaults of the mass-heartbeat-loss check.
const (
	DefaultMassLossShare = 0.5
	DefaultMassLossMin   = 10
)

// massLosses is, of one sweep's events, the tenants whose unhealthy share
// is above share with at least `least` servers.
func massLosses(ctx context.Context, counter store.LiveCounter, events []registry.Event, share float64, least int) ([]MassLoss, error) {
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
	var out []MassLoss
	for _, t := range tenants {
		n := byTenant[t]
		if float64(n) > share*float64(live[t]) {
			out = append(out, MassLoss{TenantID: t, Unhealthy: n, Live: live[t]})
		}
	}
	return out, nil
}
