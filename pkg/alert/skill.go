package alert

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// skillIDSpace is the namespace of the name-based ids of skill alerts.
var skillIDSpace = uuid.MustParse("4f1c9a52-93a3-4c6e-9a43-3f0d7e6b2c11")

// skillAlertID is the id of the raise (firing) or the resolution of the
// outage of key that began at since: the same whenever it is sent again.
func skillAlertID(key store.SkillKey, since time.Time, firing bool) uuid.UUID {
	state := "resolved"
	if firing {
		state = "firing"
	}
	return uuid.NewSHA1(skillIDSpace, []byte(key.TenantID.String()+"\x00"+key.Skill+"\x00"+
		since.UTC().Format(time.RFC3339Nano)+"\x00"+state))
}

// skillKeys are the skill names the events affected, in order of first
// mention, each with when its outage would have begun: the last event
// that took a skill of that name away (unhealthy or deregistered), else
// the last that mentions it.
func skillKeys(events []registry.Event) ([]store.SkillKey, map[store.SkillKey]time.Time) {
	var keys []store.SkillKey
	at := make(map[store.SkillKey]time.Time)
	taken := make(map[store.SkillKey]bool)
	for i := range events {
		ev := &events[i]
		takes := ev.Kind.Spec().TakesSkills
		for _, name := range ev.Body.SkillsAffected {
			k := store.SkillKey{TenantID: ev.TenantID, Skill: name}
			if _, seen := at[k]; !seen {
				keys = append(keys, k)
			}
			if takes || !taken[k] {
				at[k] = ev.OccurredAt
				taken[k] = taken[k] || takes
			}
		}
	}
	return keys, at
}

// skillRound raises and resolves ds's MCPSkillUnavailable alerts for the
// skill names that events (delivered, about to be acknowledged) affected,
// and, every resend interval or after a registration offered skills,
// reconciles ds's firing set: it resolves the alerts whose skill came back
// by other means (a new module offering it is no alert event) and, every
// resend interval, re-sends the others to a Resending destination. The
// caller holds ds's claim, so that one replica decides each raise; the
// firing set is recorded after ds accepted, so that a crash in between
// sends again rather than never.
func (d *Dispatcher) skillRound(ctx context.Context, ds *destination, events []registry.Event) error {
	if d.skills == nil {
		return nil
	}
	now := d.clock.Now()
	periodic := ds.lastSkillCheck.IsZero() || now.Sub(ds.lastSkillCheck) >= d.resend
	reconcile := ds.skillCheck.Swap(false) || periodic
	keys, at := skillKeys(events)
	if len(keys) == 0 && !reconcile {
		return nil
	}
	ok := false
	defer func() {
		if reconcile && !ok {
			ds.skillCheck.Store(true) // try again next round
		}
	}()
	var states []store.SkillAlertState
	if len(keys) > 0 {
		var err error
		if states, err = d.skills.SkillAlertStates(ctx, ds.name, keys); err != nil {
			return fmt.Errorf("skill alert states: %w", err)
		}
	}
	// kept are the firing alerts of tenants the reconcile had no answer
	// for: resent only, neither raised, resolved nor recorded.
	var kept []store.SkillAlertState
	if reconcile {
		firing, err := d.skills.FiringSkillAlerts(ctx, ds.name)
		var partial *store.PartialReadError
		switch {
		case errors.As(err, &partial):
			unanswered := tenantSet(partial.Unanswered)
			// One available again whose resolution is not recorded lapses.
			kept = keptOf(ds.skillFiring, ds.skillFiringAt, now, holdFactor*d.resend, func(st store.SkillAlertState) bool {
				return unanswered[st.TenantID] && !st.FiringSince.IsZero() && !st.Available
			})
			d.logger.DebugContext(ctx, "firing skill alerts of some tenants not read", "destination", ds.name,
				"tenants", len(partial.Unanswered), "err", partial.Err)
		case err != nil:
			return fmt.Errorf("firing skill alerts: %w", err)
		}
		ds.skillFiring = append(slices.Clip(firing), kept...)
		ds.skillFiringAt = now
		looked := make(map[store.SkillKey]bool, len(states))
		for _, st := range states {
			looked[st.SkillKey] = true
		}
		// A key of this round's events was read fresh: it is raised or
		// resolved from that, never resent from what was kept.
		kept = slices.DeleteFunc(kept, func(st store.SkillAlertState) bool { return looked[st.SkillKey] })
		for _, st := range firing {
			if !looked[st.SkillKey] {
				states = append(states, st)
			}
		}
	}

	var alerts []Alert
	hold := now.Add(holdFactor * d.resend)
	for _, st := range states {
		firing := !st.FiringSince.IsZero()
		switch {
		case !st.Available && !firing:
			since := at[st.SkillKey]
			if since.IsZero() {
				since = now
			}
			alerts = append(alerts, Alert{
				Firing: true, TenantID: st.TenantID, StartsAt: since, EndsAt: hold,
				Skill: &SkillOutage{Skill: st.Skill, ID: skillAlertID(st.SkillKey, since, true)},
			})
		case st.Available && firing:
			alerts = append(alerts, Alert{
				TenantID: st.TenantID, StartsAt: st.FiringSince, EndsAt: now,
				Skill: &SkillOutage{Skill: st.Skill, ID: skillAlertID(st.SkillKey, st.FiringSince, false)},
			})
		case !st.Available && firing && periodic && ds.resending:
			alerts = append(alerts, Alert{
				Firing: true, TenantID: st.TenantID, StartsAt: st.FiringSince, EndsAt: hold,
				Skill: &SkillOutage{Skill: st.Skill, ID: skillAlertID(st.SkillKey, st.FiringSince, true), Resend: true},
			})
		}
	}

	if periodic && ds.resending {
		for _, st := range kept {
			alerts = append(alerts, Alert{
				Firing: true, TenantID: st.TenantID, StartsAt: st.FiringSince, EndsAt: hold,
				Skill: &SkillOutage{Skill: st.Skill, ID: skillAlertID(st.SkillKey, st.FiringSince, true), Resend: true},
			})
		}
	}

	handled := 0
	var sendErr error
	for handled < len(alerts) && sendErr == nil {
		var n int
		n, sendErr = d.send(ctx, ds, alerts[handled:min(handled+d.batch, len(alerts))])
		handled += n
	}
	// Record what ds accepted, even when a later chunk failed.
	var (
		raised   []store.SkillAlertState
		resolved []store.SkillKey
	)
	for _, a := range alerts[:handled] {
		key := store.SkillKey{TenantID: a.TenantID, Skill: a.Skill.Skill}
		switch {
		case a.Skill.Resend:
		case a.Firing:
			raised = append(raised, store.SkillAlertState{SkillKey: key, FiringSince: a.StartsAt})
		default:
			resolved = append(resolved, key)
		}
	}
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	if err := d.skills.RecordSkillAlerts(recCtx, ds.name, raised, resolved); err != nil {
		return fmt.Errorf("record skill alerts: %w", err)
	}
	ds.recordedSkillAlerts(raised, resolved)
	if sendErr != nil {
		return fmt.Errorf("send skill alerts: %w", sendErr)
	}
	ok = true
	if periodic {
		ds.lastSkillCheck = now
	}
	return nil
}

// recordedSkillAlerts brings ds's last reconciled firing set up to what a
// round recorded: raised fire, resolved no longer.
func (ds *destination) recordedSkillAlerts(raised []store.SkillAlertState, resolved []store.SkillKey) {
	if ds.skillFiringAt.IsZero() || len(raised)+len(resolved) == 0 {
		return
	}
	gone := make(map[store.SkillKey]bool, len(resolved)+len(raised))
	for _, k := range resolved {
		gone[k] = true
	}
	for _, r := range raised {
		gone[r.SkillKey] = true
	}
	ds.skillFiring = slices.DeleteFunc(ds.skillFiring, func(st store.SkillAlertState) bool { return gone[st.SkillKey] })
	ds.skillFiring = append(ds.skillFiring, raised...)
}
