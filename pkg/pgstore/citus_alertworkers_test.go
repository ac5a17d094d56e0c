package pgstore_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// While a Citus worker is down, the alerts of the other workers' tenants
// are still delivered: the claim, which reads every shard, failed with
// "connection to the remote node … failed" for every tenant until the
// worker returned (found 2026-12-07). Now the claim is made per worker
// for the tenants the store knows (the sweep's list, and tenants of
// earlier claims, as one whose last server deregistered); the unhealthy
// servers and the firing skill alerts are the running worker's tenants',
// with the stopped worker's named as unanswered; the skill alerts' reads
// and records of a round reach the running worker alone. When the worker
// returns, its tenants' events come, and nothing is delivered twice.
func TestCitusAlertsWithAWorkerDown(t *testing.T) {
	c, db, clock, st := privateCitusStore(t)
	ctx := t.Context()
	const destination = "webhook"
	stopped := c.TenantsOnWorker(t, db, 0, 1)[0]
	running := c.TenantsOnWorker(t, db, 1, 2)
	live, gone := running[0], running[1]

	register(t, st, stopped, "alpha")
	register(t, st, live, "alpha")
	const interval = 10 * time.Second
	for range 8 { // 40 s: both alphas unhealthy
		if _, err := st.Sweep(ctx, store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(5 * time.Second)
	}
	deregisterNew(t, st, gone, "beta") // gone has no live server: known from the claim alone
	claimed := claimAll(t, st, destination)
	if got := kindsByTenant(claimed); len(got[stopped]) != 1 || len(got[live]) != 1 || len(got[gone]) != 1 {
		t.Fatalf("claim with every worker up: %v; want an event of each tenant", got)
	}
	if un, err := st.UnhealthyServers(ctx); err != nil || len(un) != 2 {
		t.Fatalf("unhealthy servers: %d, %v; want 2", len(un), err)
	}
	firing := []store.SkillAlertState{
		{SkillKey: store.SkillKey{TenantID: stopped, Skill: "search"}, FiringSince: clock.Now()},
		{SkillKey: store.SkillKey{TenantID: live, Skill: "search"}, FiringSince: clock.Now()},
	}
	if err := st.RecordSkillAlerts(ctx, destination, firing, nil); err != nil {
		t.Fatal(err)
	}
	if f, err := st.FiringSkillAlerts(ctx, destination); err != nil || len(f) != 2 {
		t.Fatalf("firing skill alerts: %d, %v; want 2", len(f), err)
	}
	deregisterNew(t, st, stopped, "beta") // pending when the worker stops

	c.Workers[0].Stop(t)
	deregisterNew(t, st, gone, "beta")
	deregisterNew(t, st, live, "gamma")
	claim, err := st.ClaimAlerts(ctx, destination, 100)
	if err != nil || claim == nil {
		t.Fatalf("claim with a worker down: %v, %v; want the running worker's tenants' events", claim, err)
	}
	if other, err := st.ClaimAlerts(ctx, destination, 100); err != nil || other != nil {
		t.Fatalf("a second claim while the first is held: %v, %v; want none", other, err)
	}
	got := kindsByTenant(claim.Events())
	want := map[uuid.UUID][]registry.EventKind{gone: {registry.KindDeregistered}, live: {registry.KindDeregistered}}
	if !equalKinds(got, want) {
		t.Fatalf("claim with a worker down: %v, want %v", got, want)
	}
	if err := claim.Ack(ctx, len(claim.Events())); err != nil {
		t.Fatalf("ack with a worker down: %v", err)
	}
	if again := claimAll(t, st, destination); len(again) != 0 {
		t.Fatalf("claim after the ack: %v, want none", kindsByTenant(again))
	}
	// The unhealthy servers and the firing skill alerts: the running
	// worker's tenants', and the stopped one's tenant named as unanswered.
	un, err := st.UnhealthyServers(ctx)
	if !unanswered(err, stopped) || len(un) != 1 || un[0].TenantID != live {
		t.Fatalf("unhealthy servers with a worker down: %+v, %v; want the running worker's, the stopped one's unanswered", un, err)
	}
	f, err := st.FiringSkillAlerts(ctx, destination)
	if !unanswered(err, stopped) || len(f) != 1 || f[0].TenantID != live {
		t.Fatalf("firing skill alerts with a worker down: %+v, %v; want the running worker's, the stopped one's unanswered", f, err)
	}
	// A round's skill alert reads and records of the running worker's
	// tenants reach no other worker.
	key := store.SkillKey{TenantID: live, Skill: "search"}
	if states, err := st.SkillAlertStates(ctx, destination, []store.SkillKey{key}); err != nil || len(states) != 1 {
		t.Fatalf("skill alert states with a worker down: %+v, %v", states, err)
	}
	raise := []store.SkillAlertState{{SkillKey: store.SkillKey{TenantID: gone, Skill: "fetch"}, FiringSince: clock.Now()}}
	if err := st.RecordSkillAlerts(ctx, destination, raise, []store.SkillKey{key}); err != nil {
		t.Fatalf("record skill alerts with a worker down: %v", err)
	}
	if err := st.RecordSkillAlerts(ctx, destination, raise, nil); err != nil {
		t.Fatalf("record a raise alone with a worker down: %v", err)
	}

	c.Workers[0].Start(t)
	deregisterNew(t, st, live, "delta")
	got = kindsByTenant(claimAll(t, st, destination))
	want = map[uuid.UUID][]registry.EventKind{
		stopped: {registry.KindDeregistered}, live: {registry.KindDeregistered},
	}
	if !equalKinds(got, want) {
		t.Fatalf("claim after the worker returned: %v, want %v (the stopped tenant's pending event, nothing twice)", got, want)
	}
}

// unanswered reports whether err is a partial read that names tenant, and
// tenant alone, as unanswered.
func unanswered(err error, tenant uuid.UUID) bool {
	var partial *store.PartialReadError
	return errors.As(err, &partial) && slices.Equal(partial.Unanswered, []uuid.UUID{tenant})
}

// deregisterNew registers a server of module in tenant and deregisters
// it: one alert event.
func deregisterNew(t *testing.T, st *pgstore.Store, tenant uuid.UUID, module string) {
	t.Helper()
	srv := register(t, st, tenant, module)
	if _, _, err := st.Deregister(t.Context(), tenant, srv.ServerID); err != nil {
		t.Fatal(err)
	}
}

// claimAll claims destination's alerts and acknowledges them all.
func claimAll(t *testing.T, st *pgstore.Store, destination string) []registry.Event {
	t.Helper()
	claim, err := st.ClaimAlerts(t.Context(), destination, 100)
	if err != nil || claim == nil {
		t.Fatalf("claim: %v, %v", claim, err)
	}
	events := claim.Events()
	if err := claim.Ack(t.Context(), len(events)); err != nil {
		t.Fatalf("ack: %v", err)
	}
	return events
}

func kindsByTenant(events []registry.Event) map[uuid.UUID][]registry.EventKind {
	out := make(map[uuid.UUID][]registry.EventKind)
	for _, ev := range events {
		out[ev.TenantID] = append(out[ev.TenantID], ev.Kind)
	}
	return out
}

func equalKinds(a, b map[uuid.UUID][]registry.EventKind) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
