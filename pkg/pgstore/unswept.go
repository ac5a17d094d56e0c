package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Tenants the Citus sweep could not reach. A tenant's blind window opens
// from its last sweep (mcp_tenant_servers.last_sweep_at), and a tenant
// never swept has none: a worker that stopped or hung right after a
// tenant's first registration, before any sweep reached it, left that
// tenant with no window, so that a server whose heartbeats were refused
// meanwhile (503) was marked unhealthy by the first sweep after the
// worker returned (seen by TestCitusHungWorkerOthersSwept with a tenant
// registered 0.2 s before the hang). The database cannot know of sweeps
// that never reached it; the replica that tried them does. So the sweep
// remembers, for each tenant whose sweep failed (its worker down or hung,
// or the tenant skipped), when it first failed since the tenant was last
// swept; when the tenant's worker answers again more than BlindAfter
// later, the sweep first marks the tenant swept at that first failure
// (mcp_sweep_mark_group, which leaves a later mark as it is), and the
// tenant's own sweep then opens its window, as for a tenant swept before.
// A tenant whose mark fails, or whose worker is not known, is left out of
// that sweep, as failed. A tenant this replica did not know while the
// list of tenants could not be read (registered through another replica
// meanwhile) counts as failed since that list was first unread: its
// window opens too, which at worst delays the marks of a tenant new on a
// worker that answered by one window. What another replica tried is not
// known here: a replica that sweeps for the first time after the worker
// returns marks as before.

// unsweptTenants records when each tenant's sweep first failed since it
// last succeeded.
type unsweptTenants struct {
	mu    sync.Mutex
	since map[uuid.UUID]time.Time
	// listUnread is when the list of tenants was first not read (a worker
	// down or hung) since it last was; zero: read. listKnown is the list
	// the sweep had then: a read that ends in the background meanwhile
	// (sweepprobe.go) may replace the store's list with one that holds the
	// tenants registered since, which the sweep never tried.
	listUnread time.Time
	listKnown  []uuid.UUID
}

// unread records that the sweep at at could not read the list of tenants,
// known being the list it had.
func (u *unsweptTenants) unread(at time.Time, known []uuid.UUID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.listUnread.IsZero() {
		u.listUnread, u.listKnown = at, known
	}
}

// read records a list of tenants read now: the tenants of it that were not
// in the list the sweep had when the list was first unread count as failed
// since then, when it was; the others with no live server left are
// forgotten.
func (u *unsweptTenants) read(tenants []uuid.UUID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.listUnread.IsZero() {
		known := make(map[uuid.UUID]bool, len(u.listKnown))
		for _, t := range u.listKnown {
			known[t] = true
		}
		for _, t := range tenants {
			if _, seen := u.since[t]; !known[t] && !seen {
				if u.since == nil {
					u.since = make(map[uuid.UUID]time.Time)
				}
				u.since[t] = u.listUnread
			}
		}
		u.listUnread, u.listKnown = time.Time{}, nil
	}
	if len(u.since) == 0 {
		return
	}
	keep := make(map[uuid.UUID]bool, len(tenants))
	for _, t := range tenants {
		keep[t] = true
	}
	for t := range u.since {
		if !keep[t] {
			delete(u.since, t)
		}
	}
}

// failed records that tenants' sweep failed at at, keeping an earlier
// failure.
func (u *unsweptTenants) failed(tenants []uuid.UUID, at time.Time) {
	if len(tenants) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.since == nil {
		u.since = make(map[uuid.UUID]time.Time)
	}
	for _, t := range tenants {
		if _, seen := u.since[t]; !seen {
			u.since[t] = at
		}
	}
}

// swept forgets tenants' failures.
func (u *unsweptTenants) swept(tenants []uuid.UUID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, t := range tenants {
		delete(u.since, t)
	}
}

// longer returns, of tenants, those whose sweep has failed since more
// than d before now, with when it first failed.
func (u *unsweptTenants) longer(tenants []uuid.UUID, now time.Time, d time.Duration) map[uuid.UUID]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out map[uuid.UUID]time.Time
	for _, t := range tenants {
		if since, ok := u.since[t]; ok && now.Sub(since) > d {
			if out == nil {
				out = make(map[uuid.UUID]time.Time)
			}
			out[t] = since
		}
	}
	return out
}

// sweepNow is the sweep's time on this process's clock: the store's clock
// when it has one (at), else the wall clock.
func sweepNow(at *time.Time) time.Time {
	if at != nil {
		return *at
	}
	return time.Now()
}

// markUnswept marks, before a sweep at at, the tenants of tenants whose
// worker answers and whose sweep has failed for longer than blindAfter,
// swept at their first failure (see above). It returns tenants without
// those whose mark failed or whose worker is not known, these, and the
// first error.
func (s *Store) markUnswept(ctx context.Context, at *time.Time, blindAfter time.Duration, tenants []uuid.UUID,
	workers *sweepWorkers) (kept, unmarked []uuid.UUID, err error) {
	since := s.unswept.longer(tenants, sweepNow(at), blindAfter)
	var due []uuid.UUID
	for _, t := range tenants {
		if _, ok := since[t]; !ok {
			continue
		}
		switch _, known := workers.worker(t); {
		case !known:
			// Not marked, and swept without its window: left out.
			unmarked = append(unmarked, t)
		case workers.failure(t) == nil:
			due = append(due, t)
		}
	}
	if len(unmarked) > 0 {
		err = fmt.Errorf("%w: the Citus worker of %d tenants back from a failure is not known", registry.ErrUnavailable, len(unmarked))
	}
	if len(due) == 0 {
		return leaveOut(tenants, unmarked), unmarked, err
	}
	// The mark's time on the database's clock: at, or its now() less the
	// time since the earliest failure on this process's (monotonic)
	// clock.
	base := sweepNow(at)
	if at == nil {
		if qerr := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&base); qerr != nil {
			unmarked = append(unmarked, due...)
			return leaveOut(tenants, unmarked), unmarked, cmp.Or(err, translate(qerr))
		}
	}
	groups, gerr := s.workerGroups(ctx, tenantKeys(due))
	if gerr != nil {
		unmarked = append(unmarked, due...)
		return leaveOut(tenants, unmarked), unmarked, cmp.Or(err, gerr)
	}
	// One mark, at the earliest failure: every tenant marked has failed
	// for longer than blindAfter, so its own sweep opens the same window
	// from either, and a later mark of a tenant swept since is kept.
	var first time.Time
	for _, t := range due {
		if first.IsZero() || since[t].Before(first) {
			first = since[t]
		}
	}
	mark := base.Add(-sweepNow(at).Sub(first)).UTC().Truncate(time.Microsecond)
	errs := s.markSwept(ctx, groups, &mark, blindAfter, workers)
	for g, gerr := range errs {
		group := keyTenants(groups[g])
		if gerr != nil {
			unmarked = append(unmarked, group...)
			err = cmp.Or(err, translate(gerr))
			continue
		}
		s.unswept.swept(group)
	}
	return leaveOut(tenants, unmarked), unmarked, err
}

// leaveOut returns tenants without those of out.
func leaveOut(tenants, out []uuid.UUID) []uuid.UUID {
	kept, _ := withoutTenants(tenants, out)
	return kept
}
