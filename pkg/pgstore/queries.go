package pgstore

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// Server returns one server of tenant.
func (s *Store) Server(ctx context.Context, tenant, serverID uuid.UUID) (heartbeat.Server, error) {
	servers, err := queryInTenant(ctx, s, tenant, collectServer,
		`SELECT `+serverColumns+` FROM mcp_servers WHERE server_id = $1`, serverID)
	if err != nil {
		return heartbeat.Server{}, err
	}
	if len(servers) == 0 {
		return heartbeat.Server{}, heartbeat.ErrNotFound
	}
	return servers[0], nil
}

func collectServer(row pgx.CollectableRow) (heartbeat.Server, error) { return scanServer(row) }

func collectEvent(row pgx.CollectableRow) (heartbeat.Event, error) { return scanEvent(row) }

// Servers returns a page of tenant's servers ordered by module name.
func (s *Store) Servers(ctx context.Context, tenant uuid.UUID, f heartbeat.ServerFilter) (heartbeat.ServerPage, error) {
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
	// of the advertisements (capability_bytes, migration 0011) keeps a
	// server while the servers before it hold less than the budget; the
	// first server past the page (by count or bytes) comes back without
	// its payload and only says that there is more.
	rows, err := queryInTenant(ctx, s, tenant, collectPageServer, serversPageSQL,
		tenant, status, module, afterModule, limit+1, f.PageBytes())
	if err != nil {
		return heartbeat.ServerPage{}, err
	}
	var page heartbeat.ServerPage
	page.Servers = make([]heartbeat.Server, 0, len(rows))
	for _, r := range rows {
		if r.n > int64(limit) || r.before >= int64(f.PageBytes()) {
			last := page.Servers[len(page.Servers)-1]
			page.Next = &heartbeat.ServerCursor{ModuleName: last.ModuleName, ServerID: last.ServerID}
			break
		}
		page.Servers = append(page.Servers, r.srv)
	}
	if page.Servers == nil {
		page.Servers = []heartbeat.Server{}
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
       status, last_heartbeat_at, registered_at, deregistered_at, trace_id, n, before
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
	srv       heartbeat.Server
	n, before int64
}

func collectPageServer(row pgx.CollectableRow) (pageServer, error) {
	var r pageServer
	var err error
	r.srv, err = scanServer(row, &r.n, &r.before)
	return r, err
}

// Skills returns the skills of one of tenant's servers, by name.
func (s *Store) Skills(ctx context.Context, tenant, serverID uuid.UUID) ([]heartbeat.Skill, error) {
	var skills []heartbeat.Skill
	err := s.inTenant(ctx, tenant, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mcp_servers WHERE server_id = $1)`, serverID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return heartbeat.ErrNotFound
		}
		rows, err := tx.Query(ctx, `
SELECT skill_id, server_id, name, description, available, unavailable_reason
FROM mcp_skills WHERE server_id = $1 ORDER BY name`, serverID)
		if err != nil {
			return err
		}
		skills, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (heartbeat.Skill, error) {
			var sk heartbeat.Skill
			err := row.Scan(&sk.SkillID, &sk.ServerID, &sk.Name, &sk.Description, &sk.Available, &sk.UnavailableReason)
			return sk, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if skills == nil {
		skills = []heartbeat.Skill{}
	}
	return skills, nil
}

// Events returns a page of tenant's audit trail, oldest first.
func (s *Store) Events(ctx context.Context, tenant uuid.UUID, f heartbeat.EventFilter) (heartbeat.EventPage, error) {
	limit := pageLimit(f.Limit)
	var kind *string
	if f.Kind != "" {
		k := string(f.Kind)
		kind = &k
	}
	var (
		page heartbeat.EventPage
		err  error
	)
	page.Events, err = queryInTenant(ctx, s, tenant, collectEvent, `
SELECT `+eventColumns+` FROM mcp_audit_events
WHERE tenant_id = $1 AND seq > $2
  AND ($3::uuid IS NULL OR server_id = $3)
  AND ($4::text IS NULL OR kind = $4)
ORDER BY seq
LIMIT $5`, tenant, f.AfterSeq, f.ServerID, kind, limit+1)
	if err != nil {
		return heartbeat.EventPage{}, err
	}
	if len(page.Events) > limit {
		page.Events = page.Events[:limit]
		next := page.Events[limit-1].Seq
		page.NextSeq = &next
	}
	if page.Events == nil {
		page.Events = []heartbeat.Event{}
	}
	return page, nil
}

func pageLimit(n int) int {
	switch {
	case n <= 0:
		return heartbeat.DefaultPageLimit
	case n > heartbeat.MaxPageLimit:
		return heartbeat.MaxPageLimit
	}
	return n
}
