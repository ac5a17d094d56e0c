package registry

import (
	"time"

	"github.com/google/uuid"
)

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
