package memstore

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.CatalogReader = (*Store)(nil)

// Catalog returns a page of tenant's servers that f selects, by module name.
func (s *Store) Catalog(ctx context.Context, tenantID uuid.UUID, f registry.CatalogFilter) (registry.CatalogPage, error) {
	if err := ctx.Err(); err != nil {
		return registry.CatalogPage{}, err
	}
	limit := pageLimit(f.Limit)
	search := strings.ToLower(f.Search)
	var since int64
	if f.ChangedSince != nil {
		since = f.ChangedSince.UnixMicro()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	page := registry.CatalogPage{Entries: []registry.CatalogEntry{}}
	t := s.tenants[tenantID]
	if t == nil {
		return page, nil
	}
	start := sort.Search(len(t.sorted), func(i int) bool { return t.sorted[i].module > f.AfterModule })
	for _, srv := range t.sorted[start:] {
		if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, srv.status) ||
			f.ChangedSince != nil && srv.statusChanged < since ||
			f.Search != "" && !strings.Contains(strings.ToLower(f.SearchPrefix+srv.module), search) ||
			f.Version != "" && srv.version != f.Version ||
			f.ModuleName != "" && srv.module != f.ModuleName {
			continue
		}
		if len(page.Entries) == limit {
			page.More = true
			break
		}
		e := registry.CatalogEntry{Server: srv.public(), StatusChangedAt: micros(srv.statusChanged),
			Skills: make([]registry.SkillState, len(srv.skills))}
		e.Server.CapabilityAdvertisement = nil
		for i, k := range srv.skills {
			e.Skills[i] = registry.SkillState{Name: k.name, Available: k.reason == ""}
		}
		page.Entries = append(page.Entries, e)
	}
	return page, nil
}

// LatestPosition returns the position of tenant's latest event at or
// before upTo, or the zero Position.
func (s *Store) LatestPosition(ctx context.Context, tenantID uuid.UUID, upTo registry.Position) (registry.Position, error) {
	if err := ctx.Err(); err != nil {
		return registry.Position{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.tenants[tenantID]
	if t == nil {
		return registry.Position{}, nil
	}
	if upTo.TxID != 0 {
		return registry.Position{}, registry.ErrPositionExpired
	}
	n := min(max(upTo.Seq, 0), int64(len(t.events)))
	if n == 0 {
		return registry.Position{}, nil
	}
	return s.position(n), nil
}
