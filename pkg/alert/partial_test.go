package alert_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/alert"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/store"
)

// partialOutbox is the memory store answering as a Citus store does while
// the worker of the tenants in down is down: the unhealthy servers and the
// firing skill alerts of the other tenants, with a store.PartialReadError
// that names those. (The claim is the memory store's: on Citus the down
// worker's tenants' events wait, which changes nothing here.)
type partialOutbox struct {
	*memstore.Store
	mu   sync.Mutex
	down []uuid.UUID
	// elsewhere: another replica holds every claim.
	elsewhere bool
}

func (o *partialOutbox) setElsewhere(v bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.elsewhere = v
}

func (o *partialOutbox) ClaimAlerts(ctx context.Context, destination string, limit int) (store.AlertClaim, error) {
	o.mu.Lock()
	elsewhere := o.elsewhere
	o.mu.Unlock()
	if elsewhere {
		return nil, nil
	}
	return o.Store.ClaimAlerts(ctx, destination, limit)
}

func (o *partialOutbox) setDown(tenants ...uuid.UUID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = tenants
}

func (o *partialOutbox) unanswered() []uuid.UUID {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

func (o *partialOutbox) UnhealthyServers(ctx context.Context) ([]store.UnhealthyServer, error) {
	list, err := o.Store.UnhealthyServers(ctx)
	down := o.unanswered()
	if err != nil || len(down) == 0 {
		return list, err
	}
	list = slices.DeleteFunc(list, func(u store.UnhealthyServer) bool { return slices.Contains(down, u.TenantID) })
	return list, &store.PartialReadError{Unanswered: down, Err: errors.New("worker down")}
}

func (o *partialOutbox) FiringSkillAlerts(ctx context.Context, destination string) ([]store.SkillAlertState, error) {
	list, err := o.Store.FiringSkillAlerts(ctx, destination)
	down := o.unanswered()
	if err != nil || len(down) == 0 {
		return list, err
	}
	list = slices.DeleteFunc(list, func(s store.SkillAlertState) bool { return slices.Contains(down, s.TenantID) })
	return list, &store.PartialReadError{Unanswered: down, Err: errors.New("worker down")}
}

// While the store has no answer for a tenant's unhealthy servers (on
// Citus, its worker down), Alertmanager still gets its servers' firing
// alerts at every resend interval, past the alerts' hold (they would lapse,
// a false resolution), and so do its skill outages; a server of it that
// goes unhealthy meanwhile fires (its event claimed from a worker that
// answered the claim); one that recovers meanwhile is resolved, with its
// skill, and neither is fired again.
func TestResendWhileTenantsUnanswered(t *testing.T) {
	f := newMemFixture(t)
	f.unhealthy(t)
	outbox := &partialOutbox{Store: f.store}
	am := newReceiver(t, nil)
	dests, err := alert.NewDestinations([]string{am.srv.URL}, "", "", httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	const resend = time.Minute
	d, rounds := startOnClock(t, alert.DispatcherOptions{Outbox: outbox, SkillAlerts: outbox, Destinations: dests,
		Clock: f.clock, PollInterval: resend, ResendInterval: resend})
	name := dests[0].Name()
	rounds.settle(name)
	// firing is the modules whose server alerts fire in the requests
	// after the first seen, and "skill NAME" for the skill alerts.
	seen := 0
	firing := func() map[string]bool {
		reqs := am.requests()
		out := make(map[string]bool)
		for _, r := range reqs[seen:] {
			for _, a := range amAlerts(t, r) {
				labels, _ := a["labels"].(map[string]any)
				end, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(a["endsAt"]))
				switch {
				case !end.After(f.clock.Now()):
				case labels["alertname"] == alert.AlertName:
					out[fmt.Sprint(labels["module_name"])] = true
				case labels["skill"] != nil:
					out["skill "+fmt.Sprint(labels["skill"])] = true
				}
			}
		}
		seen = len(reqs)
		return out
	}
	if got := firing(); !got["calendar"] || !got["skill create-event"] {
		t.Fatalf("before the outage: firing %v, want calendar and its skill", got)
	}

	outbox.setDown(f.tenant)
	for i := range 5 { // past the hold of three intervals
		f.clock.Advance(resend)
		rounds.settle(name)
		if got := firing(); !got["calendar"] || !got["skill create-event"] {
			t.Fatalf("resend %d with the tenant unanswered: firing %v; want calendar and its skill", i+1, got)
		}
	}

	// A server of the tenant goes unhealthy while its list is unanswered.
	other, _, _, err := f.store.Register(f.ctx, f.tenant, serverInfo("mail"), 0)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(35 * time.Second)
	f.heartbeat(t) // calendar recovers
	res, err := f.store.Sweep(f.ctx, store.SweepRequest{Interval: interval, Limit: 100})
	if err != nil || len(res.Events) != 1 || res.Events[0].ServerID != other.ServerID {
		t.Fatalf("sweep: %+v, %v; want mail unhealthy", res.Events, err)
	}
	unhealthy := res.Events[0]
	d.Transition(f.ctx, unhealthy)
	rounds.settle(name)
	if got := firing(); !got["mail"] {
		t.Fatalf("the unanswered tenant's new unhealthy server: firing %v; want mail", got)
	}

	// calendar recovered (the heartbeat above; no sweep runs after it
	// here): resolved, then never fired again from the list kept for the
	// unanswered tenant.
	for range 2 {
		f.clock.Advance(resend)
		rounds.settle(name)
		if got := firing(); got["calendar"] || got["skill create-event"] || !got["mail"] {
			t.Fatalf("resend after calendar recovered: firing %v; want mail (and its skills) alone", got)
		}
	}
}

// amFiring returns, of am's requests after the first seen ones, the
// modules whose server alerts fire at now and "skill NAME" for the skill
// alerts that fire, and those resolved; seen moves past them.
func amFiring(t *testing.T, am *receiver, seen *int, now time.Time) (firing, resolved map[string]bool) {
	t.Helper()
	reqs := am.requests()
	firing, resolved = make(map[string]bool), make(map[string]bool)
	for _, r := range reqs[*seen:] {
		for _, a := range amAlerts(t, r) {
			labels, _ := a["labels"].(map[string]any)
			end, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(a["endsAt"]))
			key := fmt.Sprint(labels["module_name"])
			if labels["skill"] != nil {
				key = "skill " + fmt.Sprint(labels["skill"])
			}
			if end.After(now) {
				firing[key] = true
			} else {
				resolved[key] = true
			}
		}
	}
	*seen = len(reqs)
	return firing, resolved
}

// startPartial starts a dispatcher to one Alertmanager on f's store as a
// partialOutbox, resending every minute, and waits for its first round.
func startPartial(t *testing.T, f *memFixture) (*partialOutbox, *receiver, func()) {
	t.Helper()
	outbox := &partialOutbox{Store: f.store}
	am := newReceiver(t, nil)
	dests, err := alert.NewDestinations([]string{am.srv.URL}, "", "", httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	_, rounds := startOnClock(t, alert.DispatcherOptions{Outbox: outbox, SkillAlerts: outbox, Destinations: dests,
		Clock: f.clock, PollInterval: time.Minute, ResendInterval: time.Minute})
	settle := func() { rounds.settle(dests[0].Name()) }
	settle()
	return outbox, am, settle
}

// What the dispatcher keeps of a tenant with no answer is as old as its
// last read: a dispatcher whose last read is older than the alerts' hold
// (three resend intervals) resends nothing of it, as a replica that takes
// the destination over does; the alerts lapse at Alertmanager.
func TestResendUnansweredPastTheHold(t *testing.T) {
	f := newMemFixture(t)
	f.unhealthy(t)
	outbox, am, settle := startPartial(t, f)
	seen := 0
	if firing, _ := amFiring(t, am, &seen, f.clock.Now()); !firing["calendar"] || !firing["skill create-event"] {
		t.Fatalf("before the outage: firing %v, want calendar and its skill", firing)
	}
	outbox.setDown(f.tenant)
	f.clock.Advance(4 * time.Minute) // one round, past the hold
	settle()
	if firing, _ := amFiring(t, am, &seen, f.clock.Now()); len(firing) != 0 {
		t.Fatalf("a round past the hold of the last read: firing %v, want nothing resent", firing)
	}
}

// A skill outage of a tenant with no answer that a round's own events
// resolve (its server recovered; the states of those events' skills are
// read fresh) is resolved, and not resent as firing from what the
// dispatcher kept of the tenant.
func TestSkillResolvedWhileTenantUnanswered(t *testing.T) {
	f := newMemFixture(t)
	f.unhealthy(t)
	outbox, am, settle := startPartial(t, f)
	seen := 0
	outbox.setDown(f.tenant)
	f.clock.Advance(time.Minute)
	settle()
	if firing, _ := amFiring(t, am, &seen, f.clock.Now()); !firing["skill create-event"] {
		t.Fatalf("a resend with the tenant unanswered: firing %v, want its skill", firing)
	}
	f.heartbeat(t)
	f.clock.Advance(time.Minute) // a periodic round, with the recovery
	settle()
	firing, resolved := amFiring(t, am, &seen, f.clock.Now())
	if !resolved["calendar"] || !resolved["skill create-event"] || firing["skill create-event"] || firing["calendar"] {
		t.Fatalf("the round of the recovery: firing %v, resolved %v; want calendar and its skill resolved alone", firing, resolved)
	}
}

// A dispatcher that found another replica holding the claim keeps nothing
// of the tenants with no answer once it claims again: the other may have
// resolved what it last read.
func TestResendUnansweredAfterAnotherReplica(t *testing.T) {
	f := newMemFixture(t)
	f.unhealthy(t)
	outbox, am, settle := startPartial(t, f)
	seen := 0
	amFiring(t, am, &seen, f.clock.Now())
	outbox.setDown(f.tenant)
	outbox.setElsewhere(true)
	f.clock.Advance(time.Minute)
	settle()
	outbox.setElsewhere(false)
	f.clock.Advance(time.Minute)
	settle()
	if firing, _ := amFiring(t, am, &seen, f.clock.Now()); len(firing) != 0 {
		t.Fatalf("a resend after another replica held the claim: firing %v, want nothing resent", firing)
	}
}
