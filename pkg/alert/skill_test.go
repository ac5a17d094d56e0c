package alert_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/alert"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// skillStore is a store with everything the skill outage alerts need.
type skillStore interface {
	store.Store
	store.AlertOutbox
	store.SkillAlerts
}

// skillFixture is a tenant of a store on a fake clock, shared with the
// dispatchers the test starts.
type skillFixture struct {
	ctx    context.Context
	clock  *clockwork.FakeClock
	store  skillStore
	tenant uuid.UUID
}

func skillInfo(module string, skills ...string) registry.ServerInfo {
	info := serverInfo(module)
	info.Skills = nil
	for _, s := range skills {
		info.Skills = append(info.Skills, registry.SkillInfo{Name: s})
	}
	return info
}

func (f *skillFixture) register(t *testing.T, module string, skills ...string) registry.Server {
	t.Helper()
	srv, _, _, err := f.store.Register(f.ctx, f.tenant, skillInfo(module, skills...), 0)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// silence moves the clock 35 s on, heartbeats the servers in alive, and
// sweeps: every other live server of the store turns unhealthy.
func (f *skillFixture) silence(t *testing.T, alive ...registry.Server) []registry.Event {
	t.Helper()
	f.clock.Advance(35 * time.Second)
	for _, srv := range alive {
		if _, _, err := f.store.Heartbeat(f.ctx, f.tenant, srv.ServerID); err != nil {
			t.Fatal(err)
		}
	}
	res, err := f.store.Sweep(f.ctx, store.SweepRequest{Now: f.clock.Now(), Interval: interval, Limit: 1000})
	evs := res.Events
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// wake wakes the dispatchers and waits until each destination has
// acknowledged every alert event: the skill alerts of those events are
// then sent and recorded.
func (f *skillFixture) wake(t *testing.T, ds []*alert.Dispatcher, dests []alert.Destination) {
	t.Helper()
	for _, dst := range dests {
		testwait.Poll(t, dst.Name()+" delivered", waitTimeout, func() error {
			for _, d := range ds {
				d.Transition(f.ctx, registry.Event{Kind: registry.KindUnhealthy})
			}
			n, _, err := f.store.PendingAlerts(f.ctx, dst.Name())
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return fmt.Errorf("%d alert events still pending", n)
			}
			return nil
		})
	}
}

// waitFiring waits until destination's firing set is want (each alert
// "skill firing since RFC 3339 time", joined by ", ").
func (f *skillFixture) waitFiring(t *testing.T, destination, want string) {
	t.Helper()
	testwait.Poll(t, destination+" firing "+want, waitTimeout, func() error {
		firing, err := f.store.FiringSkillAlerts(f.ctx, destination)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, st := range firing {
			got = append(got, st.Skill+" firing since "+st.FiringSince.Format(time.RFC3339))
		}
		if strings.Join(got, ", ") != want {
			return fmt.Errorf("fires %q", got)
		}
		return nil
	})
}

// skillPayloads are the skill outage bodies among webhook requests.
func skillPayloads(t *testing.T, reqs []recorded) []alert.SkillPayload {
	t.Helper()
	var out []alert.SkillPayload
	for _, r := range reqs {
		var p alert.SkillPayload
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatalf("webhook body %s: %v", r.body, err)
		}
		if p.AlertName == "" {
			continue // a server's event
		}
		if id := r.header.Get(alert.HeaderEventID); id != p.EventID.String() {
			t.Fatalf("skill payload %s under %s %s", r.body, alert.HeaderEventID, id)
		}
		out = append(out, p)
	}
	return out
}

// skillAMAlerts are the MCPSkillUnavailable alerts among Alertmanager
// requests.
func skillAMAlerts(t *testing.T, reqs []recorded) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range reqs {
		for _, a := range amAlerts(t, r) {
			if a["labels"].(map[string]any)["alertname"] == alert.AlertNameSkill {
				out = append(out, a)
			}
		}
	}
	return out
}

func describe(ps []alert.SkillPayload) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("[%s %s %s]", p.Status, p.Skill, p.StartsAt.Format(time.RFC3339))
	}
	return s
}

func skillStores() map[string]func(t *testing.T) *skillFixture {
	return map[string]func(t *testing.T) *skillFixture{
		"memory": func(t *testing.T) *skillFixture {
			clock := clockwork.NewFakeClockAt(epoch)
			return &skillFixture{ctx: t.Context(), clock: clock, store: memstore.New(clock), tenant: uuid.New()}
		},
		"postgres": func(t *testing.T) *skillFixture {
			f := newPGFixture(t)
			return &skillFixture{ctx: t.Context(), clock: f.clock, store: f.store, tenant: uuid.New()}
		},
	}
}

// A skill offered by two servers raises MCPSkillUnavailable once both are
// unhealthy, resolves it when one recovers, raises it again when the last
// one is deregistered, and resolves that when a new module registers the
// skill (no alert event: the periodic reconcile finds it), on both stores,
// to the webhook and to Alertmanager.
func TestSkillOutage(t *testing.T) {
	for name, open := range skillStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := open(t)
			alpha := f.register(t, "alpha", "search", "book")
			beta := f.register(t, "beta", "search")
			other := f.register(t, "other", "mail")

			am := newReceiver(t, nil)
			hook := newReceiver(t, nil)
			dests, err := alert.NewDestinations([]string{am.srv.URL}, hook.srv.URL, "", httpClient(t))
			if err != nil {
				t.Fatal(err)
			}
			opts := alert.DispatcherOptions{
				Outbox: f.store, SkillAlerts: f.store, Destinations: dests, Clock: f.clock,
				ResendInterval: time.Minute,
			}
			d, _ := start(t, opts)
			ds := []*alert.Dispatcher{d}

			// alpha unhealthy: beta still offers search; book is gone.
			evs := f.silence(t, beta, other)
			if len(evs) != 1 || evs[0].ServerID != alpha.ServerID {
				t.Fatalf("sweep: %+v, want alpha unhealthy", evs)
			}
			f.wake(t, ds, dests)
			got := skillPayloads(t, hook.requests())
			if len(got) != 1 || got[0].Skill != "book" || got[0].Status != "firing" {
				t.Fatalf("after alpha went unhealthy: %s, want book firing only", describe(got))
			}
			book := got[0]
			if book.Kind != alert.KindSkillUnavailable || book.TenantID != f.tenant || book.Severity != "critical" ||
				!book.StartsAt.Equal(evs[0].OccurredAt) || book.EndsAt != nil ||
				fmt.Sprint(book.Labels) != fmt.Sprint(map[string]string{
					"alertname": "MCPSkillUnavailable", "tenant_id": f.tenant.String(), "skill": "book", "severity": "critical",
				}) {
				t.Fatalf("book's raise %+v", book)
			}

			// beta unhealthy too: search raised, once.
			down := f.silence(t, other)
			f.wake(t, ds, dests)
			got = skillPayloads(t, hook.requests())
			if len(got) != 2 || got[1].Skill != "search" || got[1].Status != "firing" ||
				!got[1].StartsAt.Equal(down[0].OccurredAt) {
				t.Fatalf("after beta went unhealthy: %s, want search firing since %v", describe(got), down[0].OccurredAt)
			}
			raise := got[1]
			// Alertmanager also gets book again once a resend interval has
			// passed on the fake clock, before or after search depending on
			// when the dispatcher's own timer runs a round: look for search
			// by its label, not by its place (its place failed under load).
			searchAt := func(reqs []recorded) map[string]any {
				for _, a := range skillAMAlerts(t, reqs) {
					if a["labels"].(map[string]any)["skill"] == "search" {
						return a
					}
				}
				return nil
			}
			amSearch := searchAt(am.waitFor(t, "search at alertmanager", func(reqs []recorded) bool {
				return searchAt(reqs) != nil
			}))
			labels := amSearch["labels"].(map[string]any)
			if fmt.Sprint(labels) != fmt.Sprint(map[string]any{
				"alertname": "MCPSkillUnavailable", "tenant_id": f.tenant.String(), "skill": "search", "severity": "critical",
			}) || amSearch["startsAt"] != down[0].OccurredAt.UTC().Format(time.RFC3339Nano) ||
				amSearch["annotations"].(map[string]any)["summary"] == "" {
				t.Fatalf("alertmanager got %v", amSearch)
			}

			// alpha recovers: search and book resolved.
			f.clock.Advance(time.Second)
			if _, _, err := f.store.Heartbeat(f.ctx, f.tenant, alpha.ServerID); err != nil {
				t.Fatal(err)
			}
			f.wake(t, ds, dests)
			got = skillPayloads(t, hook.requests())
			if len(got) != 4 {
				t.Fatalf("after alpha recovered: %s, want book and search resolved", describe(got))
			}
			for _, p := range got[2:] {
				if p.Status != "resolved" || p.Kind != alert.KindSkillAvailable || p.EndsAt == nil ||
					!p.EndsAt.Equal(f.clock.Now()) {
					t.Fatalf("resolution %+v", p)
				}
				if p.Skill == "search" && (!p.StartsAt.Equal(raise.StartsAt) || p.EventID == raise.EventID) {
					t.Fatalf("search resolved %+v, raised %+v", p, raise)
				}
			}

			// alpha deregistered: beta is still unhealthy, so search is
			// out again; book, alpha's alone, too.
			f.clock.Advance(time.Second)
			if _, _, err := f.store.Deregister(f.ctx, f.tenant, alpha.ServerID); err != nil {
				t.Fatal(err)
			}
			f.wake(t, ds, dests)
			got = skillPayloads(t, hook.requests())
			if len(got) != 6 || got[4].Status != "firing" || got[5].Status != "firing" {
				t.Fatalf("after alpha was deregistered: %s, want book and search firing", describe(got))
			}

			// A new module offering search: no alert event, so the
			// reconcile, at the next resend interval, resolves search.
			// Alertmanager gets book re-sent meanwhile (it forgets what is
			// not), the webhook does not.
			f.register(t, "gamma", "search")
			bookSince := got[4].StartsAt.UTC().Format(time.RFC3339Nano)
			searchSince := got[5].StartsAt.UTC().Format(time.RFC3339Nano)
			amDone := func() bool {
				resent, resolved := 0, false
				for _, a := range skillAMAlerts(t, am.requests()) {
					skill := a["labels"].(map[string]any)["skill"]
					switch {
					case skill == "book" && a["startsAt"] == bookSince:
						resent++
					case skill == "search" && a["startsAt"] == searchSince:
						// The last word: a firing one is re-sent ending
						// three intervals later, a resolution ends now.
						end, _ := time.Parse(time.RFC3339Nano, a["endsAt"].(string))
						resolved = !end.After(f.clock.Now())
					}
				}
				return resent >= 2 && resolved
			}
			deadline := time.Now().Add(waitTimeout)
			for {
				got = skillPayloads(t, hook.requests())
				if len(got) > 6 && amDone() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("search never resolved after gamma registered: webhook %s, alertmanager %v",
						describe(got), skillAMAlerts(t, am.requests()))
				}
				f.clock.Advance(opts.ResendInterval)
				time.Sleep(2 * time.Millisecond)
			}
			if len(got) != 7 || got[6].Skill != "search" || got[6].Status != "resolved" {
				t.Fatalf("after gamma registered: %s, want search resolved", describe(got))
			}
			// The resolution is recorded once the webhook accepted it.
			f.waitFiring(t, dests[1].Name(), "book firing since "+got[4].StartsAt.Format(time.RFC3339))
		})
	}
}

// Two replicas on one database raise each outage once and resolve it once
// per destination, reconciles included.
func TestSkillOutageTwoReplicas(t *testing.T) {
	pg := newPGFixture(t)
	f := &skillFixture{ctx: t.Context(), clock: pg.clock, store: pg.store, tenant: uuid.New()}
	alpha := f.register(t, "alpha", "search")
	f.register(t, "beta", "search")

	hook := newReceiver(t, nil)
	client := httpClient(t)
	var (
		ds    []*alert.Dispatcher
		dests []alert.Destination
	)
	for _, store := range []skillStore{pg.store, pg.newStore(t, pg.newPool(t))} {
		w, err := alert.NewWebhook(hook.srv.URL, nil, client)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := start(t, alert.DispatcherOptions{
			Outbox: store, SkillAlerts: store, Destinations: []alert.Destination{w}, Clock: f.clock,
			ResendInterval: time.Minute, PollInterval: 10 * time.Millisecond,
		})
		ds, dests = append(ds, d), append(dests, w)
	}

	const outages = 3
	for i := range outages {
		f.silence(t) // both (alpha again) unhealthy
		f.wake(t, ds, dests)
		hook.waitFor(t, fmt.Sprintf("raise %d", i), func(reqs []recorded) bool { return len(skillPayloads(t, reqs)) == 2*i+1 })
		f.clock.Advance(time.Second)
		if _, _, err := f.store.Heartbeat(f.ctx, f.tenant, alpha.ServerID); err != nil {
			t.Fatal(err)
		}
		f.wake(t, ds, dests)
		hook.waitFor(t, fmt.Sprintf("resolution %d", i), func(reqs []recorded) bool { return len(skillPayloads(t, reqs)) == 2*i+2 })
	}
	// Reconciles on both replicas, with beta still unhealthy and alpha
	// healthy: nothing more to say.
	for range 5 {
		f.clock.Advance(time.Minute)
		f.wake(t, ds, dests)
	}
	f.waitFiring(t, dests[0].Name(), "")
	got := skillPayloads(t, hook.requests())
	ids := eventIDs(hook.requests())
	if len(got) != 2*outages {
		t.Fatalf("webhook got %s, want %d raises and resolutions", describe(got), outages)
	}
	for i, p := range got {
		if want := []string{"firing", "resolved"}[i%2]; p.Status != want || p.Skill != "search" || ids[p.EventID.String()] != 1 {
			t.Fatalf("delivery %d: %+v (id seen %d times), want search %s once", i, p, ids[p.EventID.String()], want)
		}
	}
}

// An outage that began before mcpd stopped is resolved by the next mcpd
// over the same database, when the skill comes back by a recovery (an
// alert event) or by a new module offering it (found by the reconcile at
// start), and is not raised again.
func TestSkillOutageRestart(t *testing.T) {
	pg := newPGFixture(t)
	f := &skillFixture{ctx: t.Context(), clock: pg.clock, store: pg.store, tenant: uuid.New()}
	alpha := f.register(t, "alpha", "search")
	f.register(t, "mailer", "mail")

	am := newReceiver(t, nil)
	hook := newReceiver(t, nil)
	client := httpClient(t)
	newDests := func() []alert.Destination {
		dests, err := alert.NewDestinations([]string{am.srv.URL}, hook.srv.URL, "", client)
		if err != nil {
			t.Fatal(err)
		}
		return dests
	}
	dests := newDests()
	opts := alert.DispatcherOptions{
		Outbox: f.store, SkillAlerts: f.store, Destinations: dests, Clock: f.clock, ResendInterval: time.Minute,
	}
	d, stop := start(t, opts)
	evs := f.silence(t)
	f.wake(t, []*alert.Dispatcher{d}, dests)
	since := evs[0].OccurredAt.Format(time.RFC3339)
	for _, dst := range dests {
		f.waitFiring(t, dst.Name(), "mail firing since "+since+", search firing since "+since)
	}
	stop()
	pg.store.Close()

	// While no mcpd runs: alpha recovers, a new module offers mail.
	restarted := pg.newStore(t, pg.newPool(t))
	f.store = restarted
	f.clock.Advance(time.Second)
	if _, _, err := f.store.Heartbeat(f.ctx, f.tenant, alpha.ServerID); err != nil {
		t.Fatal(err)
	}
	f.register(t, "mailer2", "mail")

	dests = newDests()
	opts.Outbox, opts.SkillAlerts, opts.Destinations = restarted, restarted, dests
	d, _ = start(t, opts)
	f.wake(t, []*alert.Dispatcher{d}, dests)
	for _, dst := range dests {
		f.waitFiring(t, dst.Name(), "")
	}
	got := skillPayloads(t, hook.requests())
	if len(got) != 4 {
		t.Fatalf("webhook got %s, want mail and search raised, then resolved", describe(got))
	}
	resolved := map[string]bool{}
	for _, p := range got[2:] {
		if p.Status != "resolved" || !p.StartsAt.Equal(evs[0].OccurredAt) {
			t.Fatalf("after the restart %+v", p)
		}
		resolved[p.Skill] = true
	}
	if !resolved["mail"] || !resolved["search"] {
		t.Fatalf("after the restart: %s, want mail and search resolved", describe(got))
	}
	for _, a := range skillAMAlerts(t, am.requests())[2:] {
		end, _ := time.Parse(time.RFC3339Nano, a["endsAt"].(string))
		if end.After(f.clock.Now()) {
			t.Fatalf("alertmanager after the restart got a firing alert %v", a)
		}
	}
	if n := len(skillAMAlerts(t, am.requests())); n != 4 {
		t.Fatalf("alertmanager got %d skill alerts, want 2 raises and 2 resolutions", n)
	}
}

// A registration that offers a skill whose outage fires resolves it at the
// dispatcher's next round, without waiting for the resend interval, when
// the registration reaches the dispatcher (as the daemon's sink passes it).
// Skill outage bodies are signed like the others.
func TestSkillOutageResolvedByRegistration(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	f := &skillFixture{ctx: t.Context(), clock: clock, store: memstore.New(clock), tenant: uuid.New()}
	f.register(t, "alpha", "search")
	hook := newReceiver(t, nil)
	secret := []byte("a webhook secret")
	w, err := alert.NewWebhook(hook.srv.URL, secret, httpClient(t))
	if err != nil {
		t.Fatal(err)
	}
	dests := []alert.Destination{w}
	d, _ := start(t, alert.DispatcherOptions{
		Outbox: f.store, SkillAlerts: f.store, Destinations: dests, Clock: f.clock, ResendInterval: time.Hour,
	})
	f.silence(t)
	f.wake(t, []*alert.Dispatcher{d}, dests)
	f.waitFiring(t, w.Name(), "search firing since "+clock.Now().Format(time.RFC3339))

	_, _, ev, err := f.store.Register(f.ctx, f.tenant, skillInfo("beta", "search"), 0)
	if err != nil {
		t.Fatal(err)
	}
	d.Transition(f.ctx, ev) // the clock stands still: no reconcile is due
	f.waitFiring(t, w.Name(), "")
	got := skillPayloads(t, hook.requests())
	if len(got) != 2 || got[1].Status != "resolved" || !got[1].EndsAt.Equal(clock.Now()) {
		t.Fatalf("webhook got %s, want search raised and resolved", describe(got))
	}
	for _, r := range hook.requests() {
		if !alert.Verify(secret, r.body, r.header.Get(alert.HeaderSignature)) {
			t.Fatalf("request %s signed %q", r.body, r.header.Get(alert.HeaderSignature))
		}
	}
}

// The skill alert records behave the same on both stores: states in the
// order asked, availability per tenant and name, a firing set per
// destination whose raises keep their first time.
func TestSkillAlertsConformance(t *testing.T) {
	for name, open := range skillStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := open(t)
			other := uuid.New()
			srv := f.register(t, "alpha", "search", "book")
			if _, _, _, err := f.store.Register(f.ctx, other, skillInfo("alpha", "mail"), 0); err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.store.Deregister(f.ctx, f.tenant, srv.ServerID); err != nil {
				t.Fatal(err)
			}
			f.register(t, "beta", "book")
			keys := []store.SkillKey{
				{TenantID: f.tenant, Skill: "search"}, {TenantID: f.tenant, Skill: "book"},
				{TenantID: f.tenant, Skill: "mail"}, {TenantID: other, Skill: "mail"},
			}
			states := func(dest string) string {
				t.Helper()
				got, err := f.store.SkillAlertStates(f.ctx, dest, keys)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for i, st := range got {
					if st.SkillKey != keys[i] {
						t.Fatalf("state %d is of %v, want %v", i, st.SkillKey, keys[i])
					}
					out = append(out, fmt.Sprintf("%s:%v:%s", st.Skill, st.Available, st.FiringSince.Format(time.RFC3339)))
				}
				return strings.Join(out, " ")
			}
			zero := time.Time{}.Format(time.RFC3339)
			if got, want := states("d"), "search:false:"+zero+" book:true:"+zero+" mail:false:"+zero+" mail:true:"+zero; got != want {
				t.Fatalf("states %s, want %s", got, want)
			}
			first := epoch.Add(time.Minute)
			raise := []store.SkillAlertState{{SkillKey: keys[0], FiringSince: first}, {SkillKey: keys[2], FiringSince: first}}
			if err := f.store.RecordSkillAlerts(f.ctx, "d", raise, nil); err != nil {
				t.Fatal(err)
			}
			raise[0].FiringSince = first.Add(time.Hour) // raised again: the first time stays
			if err := f.store.RecordSkillAlerts(f.ctx, "d", raise[:1], []store.SkillKey{keys[2]}); err != nil {
				t.Fatal(err)
			}
			at := first.Format(time.RFC3339)
			if got, want := states("d"), "search:false:"+at+" book:true:"+zero+" mail:false:"+zero+" mail:true:"+zero; got != want {
				t.Fatalf("states %s, want %s", got, want)
			}
			if got, want := states("e"), "search:false:"+zero+" book:true:"+zero+" mail:false:"+zero+" mail:true:"+zero; got != want {
				t.Fatalf("another destination's states %s, want %s", got, want)
			}
			f.waitFiring(t, "d", "search firing since "+at)
			f.waitFiring(t, "e", "")
			if got, err := f.store.SkillAlertStates(f.ctx, "d", nil); err != nil || len(got) != 0 {
				t.Fatalf("no keys: %v, %v", got, err)
			}
		})
	}
}
