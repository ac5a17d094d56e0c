package pgstore

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/store"
)

// SkillAlertStates reports, for each key, whether a skill of that name is
// available in its tenant now and since when destination's
// MCPSkillUnavailable alert about it fires (zero: not firing), in the
// order of keys.
func (s *Store) SkillAlertStates(ctx context.Context, destination string, keys []store.SkillKey) ([]store.SkillAlertState, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	tenants := make([]uuid.UUID, len(keys))
	skills := make([]string, len(keys))
	for i, k := range keys {
		tenants[i], skills[i] = k.TenantID, k.Skill
	}
	rctx, cancel := context.WithTimeout(ctx, alertReadTimeout)
	defer cancel()
	rows, err := s.pool.Query(rctx, `
SELECT tenant_id, skill, available, firing_since FROM mcp_skill_alert_states($1, $2, $3)`,
		destination, tenants, skills)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, scanSkillAlertState)
	return out, translate(err)
}

// FiringSkillAlerts lists destination's firing MCPSkillUnavailable alerts,
// each with whether a skill of its name is available again. On Citus,
// while a worker is down or known to hang, those of the workers that
// answer, with a *store.PartialReadError (readAlertRows).
func (s *Store) FiringSkillAlerts(ctx context.Context, destination string) ([]store.SkillAlertState, error) {
	const columns = `SELECT tenant_id, skill, available, firing_since`
	return readAlertRows(ctx, s, columns+` FROM mcp_skill_alerts_firing($1)`,
		columns+` FROM mcp_skill_alerts_firing_of($1, $2)`, []any{destination},
		scanSkillAlertState, func(f store.SkillAlertState) uuid.UUID { return f.TenantID })
}

// RecordSkillAlerts records that destination accepted the raise of the
// alerts in raised (firing since their FiringSince) and the resolution of
// those in resolved. A raise already recorded keeps its first time.
func (s *Store) RecordSkillAlerts(ctx context.Context, destination string, raised []store.SkillAlertState, resolved []store.SkillKey) error {
	if len(raised) == 0 && len(resolved) == 0 {
		return nil
	}
	tenants := make([]uuid.UUID, len(raised))
	skills := make([]string, len(raised))
	since := make([]time.Time, len(raised))
	for i, r := range raised {
		tenants[i], skills[i], since[i] = r.TenantID, r.Skill, r.FiringSince
	}
	rTenants := make([]uuid.UUID, len(resolved))
	rSkills := make([]string, len(resolved))
	for i, k := range resolved {
		rTenants[i], rSkills[i] = k.TenantID, k.Skill
	}
	_, err := s.pool.Exec(ctx, `SELECT mcp_skill_alerts_record($1, $2, $3, $4, $5, $6)`,
		destination, tenants, skills, since, rTenants, rSkills)
	return translate(err)
}

func scanSkillAlertState(row pgx.CollectableRow) (store.SkillAlertState, error) {
	var (
		st    store.SkillAlertState
		since *time.Time
	)
	err := row.Scan(&st.TenantID, &st.Skill, &st.Available, &since)
	if since != nil {
		st.FiringSince = since.UTC()
	}
	return st, err
}
