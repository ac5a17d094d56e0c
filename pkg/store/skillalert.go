package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// SkillAlerts is the store's durable record of the MCPSkillUnavailable
// alerts each destination was told are firing, and its view of which skill
// names are available.
type SkillAlerts interface {
	// SkillAlertStates reports, for each key, whether a skill of that name
	// is available in its tenant now and since when destination's alert
	// about it fires (zero: not firing).
	SkillAlertStates(ctx context.Context, destination string, keys []SkillKey) ([]SkillAlertState, error)
	// FiringSkillAlerts lists destination's firing alerts, each with
	// whether a skill of its name is available again; a
	// *PartialReadError when some tenants' are missing.
	FiringSkillAlerts(ctx context.Context, destination string) ([]SkillAlertState, error)
	// RecordSkillAlerts records that destination accepted the raise of
	// raised (firing since their FiringSince) and the resolution of
	// resolved.
	RecordSkillAlerts(ctx context.Context, destination string, raised []SkillAlertState, resolved []SkillKey) error
}

// SkillKey names the skills of one name in one tenant: the subject of a
// skill outage alert.
type SkillKey struct {
	TenantID uuid.UUID
	Skill    string
}

// SkillAlertState is, for one skill name of a tenant, whether a skill of
// that name is available now and since when a destination's
// MCPSkillUnavailable alert about it has been firing.
type SkillAlertState struct {
	SkillKey
	// Available is true while at least one skill of the name is available.
	Available bool
	// FiringSince is when the outage the destination was told of began;
	// zero when the destination's alert is not firing.
	FiringSince time.Time
}
