package pgstore

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Server returns one server of tenant.
func (s *Store) Server(ctx context.Context, tenant, serverID uuid.UUID) (registry.Server, error) {
	// tenant_id as well as row-level security: Citus routes the read to
	// the tenant's shard by it (without, it reads every worker, and fails
	// while one is down).
	servers, err := queryInTenant(ctx, s, tenant, collectServer,
		`SELECT `+serverColumns+` FROM mcp_servers WHERE tenant_id = $2 AND server_id = $1`, serverID, tenant)
	if err != nil {
		return registry.Server{}, err
	}
	if len(servers) == 0 {
		return registry.Server{}, registry.ErrNotFound
	}
	return servers[0], nil
}

func collectServer(row pgx.CollectableRow) (registry.Server, error) { return scanServer(row) }

// Servers returns a page of tenant's servers ordered by module name.
func (s *Store) Servers(ctx context.Context, tenant uuid.UUID, f registry.ServerFilter) (registry.ServerPage, error) {
	limit := pageLimit(f.Limit)
	var status, module *string
	if f.Status != "" {
		st := string(f.Status)
		status = &st
	}
	if f.ModuleName != "" {
		module = &f.ModuleName
	}
	// A module name is one server of its tenant for good (servers are
	// never deleted, a re-registration keeps its id), so the page after a
	// cursor is the module names after the cursor's: an index range scan of
	// (tenant_id, module_name) that stops after the page, at any tenant size.
	afterModule := ""
	if f.After != nil {
		afterModule = f.After.ModuleName
	}
	// The page is bounded by bytes too: a running sum of the stored sizes
	// of the advertisements (capability_bytes, migration 0012) keeps a
	// server while the servers before it hold less than the budget; the
	// first server past the page (by count or bytes) comes back without
	// its payload and only says that there is more.
	rows, horizon, err := queryInTenantAt(ctx, s, tenant, collectPageServer, serversPageSQL,
		tenant, status, module, afterModule, limit+1, f.PageBytes())
	if err != nil {
		return registry.ServerPage{}, err
	}
	page := registry.ServerPage{Horizon: horizon}
	page.Servers = make([]registry.Server, 0, len(rows))
	for _, r := range rows {
		if r.n > int64(limit) || r.before >= int64(f.PageBytes()) {
			last := page.Servers[len(page.Servers)-1]
			page.Next = &registry.ServerCursor{ModuleName: last.ModuleName, ServerID: last.ServerID}
			break
		}
		page.Servers = append(page.Servers, r.srv)
	}
	if page.Servers == nil {
		page.Servers = []registry.Server{}
	}
	return page, nil
}

// serversPageSQL selects a page of servers ($5 is the page's limit + 1, $6
// its byte budget) with, for each, its position and the advertisement
// bytes before it. The window and the limit stream over the index range of
// (tenant_id, module_name); payloads are read only for the rows sent.
var serversPageSQL = `
SELECT server_id, tenant_id, module_name, version, supported_protocols,
       CASE WHEN n < $5 AND before < $6 THEN capability_advertisement END,
       status, last_heartbeat_at, registered_at, deregistered_at, trace_id, remotes, description, title, n, before
FROM (
    SELECT ` + serverColumns + `,
           row_number() OVER w AS n,
           COALESCE(sum(capability_bytes) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before,
           COALESCE(sum(capability_bytes) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING), 0) AS before_prev
    FROM mcp_servers
    WHERE tenant_id = $1
      AND ($2::text IS NULL OR status = $2)
      AND ($3::text IS NULL OR module_name = $3)
      AND module_name > $4
    WINDOW w AS (ORDER BY module_name)
    ORDER BY module_name
    LIMIT $5
) p
WHERE before_prev < $6
ORDER BY module_name`

// pageServer is one row of serversPageSQL.
type pageServer struct {
	srv       registry.Server
	n, before int64
}

func collectPageServer(row pgx.CollectableRow) (pageServer, error) {
	var r pageServer
	var err error
	r.srv, err = scanServer(row, &r.n, &r.before)
	return r, err
}

// Skills returns the skills of one of tenant's servers, by name.
func (s *Store) Skills(ctx context.Context, tenant, serverID uuid.UUID) ([]registry.Skill, error) {
	var skills []registry.Skill
	err := s.inTenant(ctx, tenant, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mcp_servers WHERE tenant_id = $2 AND server_id = $1)`,
			serverID, tenant).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return registry.ErrNotFound
		}
		rows, err := tx.Query(ctx, `
SELECT skill_id, server_id, name, description, available, unavailable_reason
FROM mcp_skills WHERE tenant_id = $2 AND server_id = $1 ORDER BY name`, serverID, tenant)
		if err != nil {
			return err
		}
		skills, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (registry.Skill, error) {
			var sk registry.Skill
			err := row.Scan(&sk.SkillID, &sk.ServerID, &sk.Name, &sk.Description, &sk.Available, &sk.UnavailableReason)
			return sk, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if skills == nil {
		skills = []registry.Skill{}
	}
	return skills, nil
}

func collectFeedRow(row pgx.CollectableRow) (feedRow, error) { return scanFeedRow(row) }

// Events returns a page of tenant's audit trail in commit order: the events
// up to the tenant's position read in the same statement (one snapshot: the
// position and the events agree, and no event before it can still commit),
// with that position as the horizon.
func (s *Store) Events(ctx context.Context, tenant uuid.UUID, f registry.EventFilter) (registry.EventPage, error) {
	if f.After.TxID != 0 {
		return registry.EventPage{}, registry.ErrPositionExpired
	}
	limit := pageLimit(f.Limit)
	var kind, module *string
	if f.Kind != "" {
		k := string(f.Kind)
		kind = &k
	}
	if f.ModuleName != "" {
		module = &f.ModuleName
	}
	// On Citus the positions carry the cluster's epoch, read before them.
	cluster, err := s.citusEpoch(ctx)
	if err != nil {
		return registry.EventPage{}, err
	}
	// The horizon is one row, computed once, materialized so that the
	// planner does not evaluate it again per event.
	rows, err := queryInTenant(ctx, s, tenant, collectFeedRow, `
WITH h AS MATERIALIZED (
    SELECT mcp_feed_epoch() AS epoch,
           COALESCE((SELECT f.position FROM mcp_tenant_feed f WHERE f.tenant_id = $1), 0) AS horizon
)
SELECT h.epoch, h.horizon, e.position, e.seq, e.event_id, e.tenant_id, e.kind, e.server_id,
       e.module_name, e.from_status, e.to_status, e.trace_id, e.occurred_at, e.body
FROM h
LEFT JOIN LATERAL (
    SELECT * FROM mcp_audit_events a
    WHERE a.tenant_id = $1 AND a.position > $2 AND a.position <= h.horizon
      AND ($3::uuid IS NULL OR a.server_id = $3)
      AND ($4::text IS NULL OR a.module_name = $4)
      AND ($5::text IS NULL OR a.kind = $5)
    ORDER BY a.position
    LIMIT $6
) e ON true
ORDER BY e.position`, tenant, max(f.After.Seq, 0), f.ServerID, module, kind, limit+1)
	if err != nil {
		return registry.EventPage{}, err
	}
	var page registry.EventPage
	page.Events, page.Horizon = feedEvents(rows)
	if cluster != 0 {
		page.Horizon.Epoch = cluster
		for i := range page.Events {
			page.Events[i].Position.Epoch = cluster
		}
	}
	// Never before the page's start.
	page.Horizon = page.Horizon.Max(f.After)
	if len(page.Events) > limit {
		page.Events = page.Events[:limit]
		next := page.Events[limit-1].Position
		page.Next = &next
		page.Horizon = next
	}
	if page.Events == nil {
		page.Events = []registry.Event{}
	}
	return page, nil
}

// FindSkills returns a page of tenant's skills by name, then module name.
func (s *Store) FindSkills(ctx context.Context, tenant uuid.UUID, f registry.SkillFilter) (registry.SkillPage, error) {
	limit := pageLimit(f.Limit)
	var name, module, protocol, status *string
	if f.Name != "" {
		name = &f.Name
	}
	if f.ModuleName != "" {
		module = &f.ModuleName
	}
	if f.Protocol != "" {
		protocol = &f.Protocol
	}
	if f.ServerStatus != "" {
		st := string(f.ServerStatus)
		status = &st
	}
	var afterName, afterModule string
	if f.After != nil {
		afterName, afterModule = f.After.Name, f.After.ModuleName
	}
	var (
		page registry.SkillPage
		err  error
	)
	page.Skills, page.Horizon, err = queryInTenantAt(ctx, s, tenant, collectSkillEntry, `
SELECT sk.skill_id, sk.server_id, sk.name, sk.description, sk.available, sk.unavailable_reason,
       s.module_name, s.status, s.version, s.supported_protocols, s.remotes
FROM mcp_skills sk
JOIN mcp_servers s ON s.server_id = sk.server_id AND s.tenant_id = sk.tenant_id
WHERE sk.tenant_id = $1
  AND ($2::text IS NULL OR sk.name = $2)
  AND ($3::text IS NULL OR s.module_name = $3)
  AND ($4::bool IS NULL OR sk.available = $4)
  AND ($5::text IS NULL OR $5 = ANY (s.supported_protocols))
  AND ($6::text IS NULL OR s.status = $6)
  AND sk.name >= $7
  AND (sk.name, s.module_name) > ($7, $8)
ORDER BY sk.name, s.module_name
LIMIT $9`, tenant, name, module, f.Available, protocol, status, afterName, afterModule, limit+1)
	if err != nil {
		return registry.SkillPage{}, err
	}
	if len(page.Skills) > limit {
		page.Skills = page.Skills[:limit]
		last := page.Skills[limit-1]
		page.Next = &registry.SkillCursor{Name: last.Name, ModuleName: last.ModuleName}
	}
	if page.Skills == nil {
		page.Skills = []registry.SkillEntry{}
	}
	return page, nil
}

func collectSkillEntry(row pgx.CollectableRow) (registry.SkillEntry, error) {
	var (
		sk      registry.SkillEntry
		status  string
		remotes []byte
	)
	if err := row.Scan(&sk.SkillID, &sk.ServerID, &sk.Name, &sk.Description, &sk.Available, &sk.UnavailableReason,
		&sk.ModuleName, &status, &sk.Version, &sk.SupportedProtocols, &remotes); err != nil {
		return sk, err
	}
	sk.ServerStatus = registry.Status(status)
	var err error
	if sk.Remotes, err = decodeRemotes(remotes); err != nil {
		return sk, err
	}
	if sk.SupportedProtocols == nil {
		sk.SupportedProtocols = []string{}
	}
	return sk, err
}

func pageLimit(n int) int {
	switch {
	case n <= 0:
		return registry.DefaultPageLimit
	case n > registry.MaxPageLimit:
		return registry.MaxPageLimit
	}
	return n
}
