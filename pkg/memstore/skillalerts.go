package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/store"
)

// skillAvailable reports whether tenant t has a skill named name that is
// available; the caller holds the lock.
func (s *Store) skillAvailable(tenantID uuid.UUID, name string) bool {
	t := s.tenants[tenantID]
	if t == nil {
		return false
	}
	for _, srv := range t.sorted {
		i, ok := slices.BinarySearchFunc(srv.skills, name, func(e skill, n string) int { return cmp.Compare(e.name, n) })
		if ok && srv.skills[i].reason == "" {
			return true
		}
	}
	return false
}

// SkillAlertStates reports, for each key, whether a skill of that name is
// available in its tenant now and since when destination's
// MCPSkillUnavailable alert about it fires (zero: not firing), in the
// order of keys.
func (s *Store) SkillAlertStates(ctx context.Context, destination string, keys []store.SkillKey) ([]store.SkillAlertState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]store.SkillAlertState, len(keys))
	for i, k := range keys {
		out[i] = store.SkillAlertState{
			SkillKey: k, Available: s.skillAvailable(k.TenantID, k.Skill), FiringSince: s.skillAlerts[destination][k],
		}
	}
	return out, nil
}

// FiringSkillAlerts lists destination's firing MCPSkillUnavailable alerts,
// each with whether a skill of its name is available again, by tenant and
// skill.
func (s *Store) FiringSkillAlerts(ctx context.Context, destination string) ([]store.SkillAlertState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]store.SkillAlertState, 0, len(s.skillAlerts[destination]))
	for k, since := range s.skillAlerts[destination] {
		out = append(out, store.SkillAlertState{SkillKey: k, Available: s.skillAvailable(k.TenantID, k.Skill), FiringSince: since})
	}
	slices.SortFunc(out, func(a, b store.SkillAlertState) int {
		return cmp.Or(slices.Compare(a.TenantID[:], b.TenantID[:]), cmp.Compare(a.Skill, b.Skill))
	})
	return out, nil
}

// RecordSkillAlerts records that destination accepted the raise of the
// alerts in raised (firing since their FiringSince) and the resolution of
// those in resolved. A raise already recorded keeps its first time.
func (s *Store) RecordSkillAlerts(ctx context.Context, destination string, raised []store.SkillAlertState, resolved []store.SkillKey) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	firing := s.skillAlerts[destination]
	if firing == nil && len(raised) > 0 {
		if s.skillAlerts == nil {
			s.skillAlerts = make(map[string]map[store.SkillKey]time.Time)
		}
		firing = make(map[store.SkillKey]time.Time)
		s.skillAlerts[destination] = firing
	}
	for _, r := range raised {
		if _, ok := firing[r.SkillKey]; !ok {
			firing[r.SkillKey] = r.FiringSince
		}
	}
	for _, k := range resolved {
		delete(firing, k)
	}
	return nil
}
