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
	var (
		page heartbeat.ServerPage
		err  error
	)
	page.Servers, err = queryInTenant(ctx, s, tenant, collectServer, `
SELECT `+serverColumns+` FROM mcp_servers
WHERE tenant_id = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR module_name = $3)
  AND module_name > $4
ORDER BY module_name
LIMIT $5`, tenant, status, module, afterModule, limit+1)
	if err != nil {
		return heartbeat.ServerPage{}, err
	}
	if len(page.Servers) > limit {
		page.Servers = page.Servers[:limit]
		last := page.Servers[limit-1]
		page.Next = &heartbeat.ServerCursor{ModuleName: last.ModuleName, ServerID: last.ServerID}
	}
	if page.Servers == nil {
		page.Servers = []heartbeat.Server{}
	}
	return page, nil
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
