package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// A replica that starts while a Citus worker is down cannot read the list
// of tenants (a read of every shard), and swept nothing, nor delivered an
// alert, until the worker returned (a black-box run, 2026-12-07: 30 s
// without a transition of the running worker's tenants, with only such
// replicas alive). It sweeps the list that a sweep saved on the
// coordinator: the running worker's silent server moves on time, the
// stopped worker's tenant counts as failed; and its alert claim reaches
// the running worker's tenants.
func TestCitusReplicaStartedWithAWorkerDown(t *testing.T) {
	c, db, clock, first := privateCitusStore(t)
	ctx := t.Context()
	stopped := c.TenantsOnWorker(t, db, 0, 1)[0]
	running := c.TenantsOnWorker(t, db, 1, 1)[0]
	register(t, first, stopped, "alpha")
	silent := register(t, first, running, "silent")
	const interval = 10 * time.Second
	req := func() store.SweepRequest {
		return store.SweepRequest{Now: clock.Now(), Interval: interval, Limit: 100, BlindAfter: 2 * interval}
	}
	if _, err := first.Sweep(ctx, req()); err != nil {
		t.Fatal(err)
	}
	first.Close()

	c.Workers[0].Stop(t)
	started := pgstore.New(db.App, pgstore.Options{Clock: clock})
	t.Cleanup(started.Close)
	var events []registry.Event
	for range 7 { // 35 s
		clock.Advance(5 * time.Second)
		res, err := started.Sweep(ctx, req())
		var partial *registry.PartialError
		if !errors.As(err, &partial) || partial.Failed != 1 {
			t.Fatalf("sweep of a replica started with a worker down: %v; want the stopped worker's tenant failed alone", err)
		}
		events = append(events, res.Events...)
	}
	if len(events) != 2 || events[0].ServerID != silent.ServerID || events[0].Kind != registry.KindDegraded ||
		events[1].Kind != registry.KindUnhealthy {
		t.Fatalf("the running worker's sweeps: %+v, want silent degraded then unhealthy", events)
	}
	claim, err := started.ClaimAlerts(ctx, "webhook", 100)
	if err != nil || claim == nil {
		t.Fatalf("claim of a replica started with a worker down: %v, %v", claim, err)
	}
	if got := kindsByTenant(claim.Events()); len(got) != 1 || len(got[running]) != 1 || got[running][0] != registry.KindUnhealthy {
		t.Fatalf("claim of a replica started with a worker down: %v, want the running tenant's unhealthy event", got)
	}
	claim.Release(ctx)
}

// A replica started while a worker hangs (a frozen host: its read of
// every shard never ends, where a stopped worker's fails at once) loads
// the saved list before that read, so that its sweeps fall back on it
// after half their time instead of waiting for the read until they run
// out of it: the running worker's silent server moves on time.
func TestCitusReplicaStartedWithAWorkerHung(t *testing.T) {
	h := newShortSweeps(t, pgstore.Options{})
	testwait.Until(t, "the first replica's list saved", testwait.Cap, func() bool {
		var n int
		_ = h.db.Admin.QueryRow(t.Context(), `SELECT count(*) FROM mcp_sweep_tenant_list`).Scan(&n)
		return n > 0
	})
	h.c.Workers[1].Freeze(t)
	started := pgstore.New(h.db.App, pgstore.Options{Clock: h.clock})
	t.Cleanup(started.Close)
	h.st = started
	h.sweepSilentServer(t, func(err error) bool { return err == nil })
	h.c.Workers[1].Thaw(t)
}
