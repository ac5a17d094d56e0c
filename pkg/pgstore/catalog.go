package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.CatalogReader = (*Store)(nil)

// catalogSQL selects a page of the MCP registry API ($10 is the page's
// limit + 1): the server without its capability advertisement (the API
// does not show it), when its registration or status last changed
// (status_changed_at, migration 0015), and its skills by name. It walks
// the index of (tenant_id, module_name) after $9.
var catalogSQL = `
SELECT ` + strings.Replace(serverColumns, "capability_advertisement", "NULL::jsonb", 1) + `,
       status_changed_at,
       COALESCE((SELECT jsonb_agg(jsonb_build_object('name', k.name, 'available', k.available) ORDER BY k.name)
                 FROM mcp_skills k WHERE k.tenant_id = $1 AND k.server_id = s.server_id), '[]'::jsonb)
FROM mcp_servers s
WHERE tenant_id = $1
  AND ($2::text[] IS NULL OR status = ANY ($2::text[]))
  AND ($3::timestamptz IS NULL OR status_changed_at >= $3)
  AND ($4::text IS NULL OR strpos(lower($5::text || module_name), lower($4)) > 0)
  AND ($6::text IS NULL OR version = $6)
  AND ($7::text IS NULL OR module_name = $7)
  AND module_name > $8
ORDER BY module_name
LIMIT $9`

// Catalog returns a page of tenant's servers that f selects, by module name.
func (s *Store) Catalog(ctx context.Context, tenant uuid.UUID, f registry.CatalogFilter) (registry.CatalogPage, error) {
	limit := pageLimit(f.Limit)
	var statuses []string
	for _, st := range f.Statuses {
		statuses = append(statuses, string(st))
	}
	entries, err := queryInTenant(ctx, s, tenant, collectCatalogEntry, catalogSQL,
		tenant, statuses, f.ChangedSince, nullIfEmpty(f.Search), f.SearchPrefix, nullIfEmpty(f.Version),
		nullIfEmpty(f.ModuleName), f.AfterModule, limit+1)
	if err != nil {
		return registry.CatalogPage{}, err
	}
	page := registry.CatalogPage{Entries: entries}
	if len(entries) > limit {
		page.Entries, page.More = entries[:limit], true
	}
	if page.Entries == nil {
		page.Entries = []registry.CatalogEntry{}
	}
	return page, nil
}

func collectCatalogEntry(row pgx.CollectableRow) (registry.CatalogEntry, error) {
	var (
		e      registry.CatalogEntry
		skills []byte
		err    error
	)
	if e.Server, err = scanServer(row, &e.StatusChangedAt, &skills); err != nil {
		return e, err
	}
	e.StatusChangedAt = e.StatusChangedAt.UTC()
	if err := json.Unmarshal(skills, &e.Skills); err != nil {
		return e, fmt.Errorf("decode skills: %w", err)
	}
	if e.Skills == nil {
		e.Skills = []registry.SkillState{}
	}
	return e, nil
}

// LatestPosition returns the position of tenant's latest event at or
// before upTo, or the zero Position: the tenant's positions have no gaps,
// so it is the tenant's present position, or upTo when that is earlier.
func (s *Store) LatestPosition(ctx context.Context, tenant uuid.UUID, upTo registry.Position) (registry.Position, error) {
	if upTo.TxID != 0 {
		return registry.Position{}, registry.ErrPositionExpired
	}
	now, err := s.Horizon(ctx, tenant)
	if err != nil {
		return registry.Position{}, err
	}
	n := min(now.Seq, max(upTo.Seq, 0))
	if n == 0 {
		return registry.Position{}, nil
	}
	return tenantPosition(int64(now.Epoch), n), nil
}
