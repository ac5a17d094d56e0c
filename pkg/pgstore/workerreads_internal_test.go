package pgstore

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// workerGroupAt returns the Citus group of the node at port.
func workerGroupAt(t *testing.T, db *pgtest.DB, port int) int64 {
	t.Helper()
	var group int64
	if err := db.Admin.QueryRow(t.Context(), `SELECT groupid FROM pg_dist_node WHERE nodeport = $1`, port).Scan(&group); err != nil {
		t.Fatal(err)
	}
	return group
}

// A pool of reads on a worker keeps no connection that reached another
// node than that worker's primary: another worker, or the coordinator.
func TestWorkerPoolProvesItsWorker(t *testing.T) {
	c := pgtest.SharedCitus(t)
	db := c.NewDB(t)
	s := New(db.App, Options{})
	t.Cleanup(s.Close)
	first, second := c.Workers[0], c.Workers[1]
	group := workerGroupAt(t, db, first.Port())
	pool, err := s.newWorkerPool(t.Context(), group, "127.0.0.1", uint16(first.Port()))
	if err != nil {
		t.Fatalf("the worker's own address: %v", err)
	}
	pool.Close()
	for name, port := range map[string]int{"the other worker": second.Port(), "the coordinator": c.Coordinator.Port()} {
		if pool, err := s.newWorkerPool(t.Context(), group, "127.0.0.1", uint16(port)); !errors.Is(err, errNotTheWorker) {
			if pool != nil {
				pool.Close()
			}
			t.Fatalf("%s as group %d's worker: %v, want %v", name, group, err, errNotTheWorker)
		}
	}
}

// A worker that the store cannot reach at the address Citus lists (a
// network where only the coordinator reaches the workers) is read through
// the coordinator: before its first connection, after that failed, and
// when a pool it had stops connecting (the read runs again through the
// coordinator at once, and the pool is dropped).
func TestWorkerReadsFallBackToTheCoordinator(t *testing.T) {
	c, db, s, tenant := storeWithOneEvent(t)
	ctx := t.Context()
	group := workerGroupAt(t, db, c.Workers[0].Port())
	closed := closedPort(t)
	w := &s.workerReads
	node := &workerReadNode{host: "127.0.0.1", port: closed}
	// Set once the store's own read of the workers' addresses, begun by
	// the registration, has ended: ending after, it would put the listed
	// address in the node's place (seen once in CI under load).
	testwait.Until(t, "the store's read of the workers' addresses to end", 30*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.reading {
			return false
		}
		w.nodes[group], w.readAt = node, time.Now()
		return true
	})
	seq := int64(1)
	read := func(what string) {
		t.Helper()
		p, err := s.Horizon(ctx, tenant)
		if err != nil || p.Seq != seq {
			t.Fatalf("%s: %v, %v; want the position of the events so far, %d", what, p, err, seq)
		}
		if _, err := s.ReadFeed(ctx, []uuid.UUID{tenant}, []registry.Position{{}}, 10); err != nil {
			t.Fatalf("%s: a read of the trail: %v", what, err)
		}
	}
	read("while the first connection is tried")
	testwait.Until(t, "the first connection to fail", 30*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !node.failedAt.IsZero() && !node.opening
	})
	read("after the first connection failed")

	// A pool that no longer connects (each is closed once dropped).
	newStale := func() *pgxpool.Pool {
		t.Helper()
		cfg, err := pgxpool.ParseConfig(db.AppURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.Port = closed
		stale, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stale.Close)
		return stale
	}
	stalePool := func(what string) {
		t.Helper()
		w.mu.Lock()
		node.pool = newStale()
		w.mu.Unlock()
		read(what)
		w.mu.Lock()
		dropped := node.pool == nil
		w.mu.Unlock()
		if !dropped {
			t.Fatalf("%s: the pool that no longer connects was kept", what)
		}
	}
	stalePool("with a pool that no longer connects")
	// A registration's call, made on the worker when its pool gives a
	// connection, is made through the coordinator when it does not.
	w.mu.Lock()
	node.pool, node.failedAt = newStale(), time.Time{}
	w.mu.Unlock()
	calls := w.writes.Load()
	if _, _, _, err := s.Register(ctx, tenant, registry.ServerInfo{ModuleName: "after", Version: "1.0.0"}, 0); err != nil {
		t.Fatalf("a registration with a pool that no longer connects: %v", err)
	}
	seq++
	if n := w.writes.Load() - calls; n != 0 {
		t.Fatalf("%d calls counted as made on the worker through a pool that no longer connects", n)
	}
	w.mu.Lock()
	dropped := node.pool == nil
	w.mu.Unlock()
	if !dropped {
		t.Fatal("a registration kept the pool that no longer connects")
	}
	read("after a registration through the coordinator")
}

// storeWithOneEvent returns a store on a fresh database of the shared
// Citus cluster and a tenant of its first worker with one event, a
// registration.
func storeWithOneEvent(t *testing.T) (*pgtest.Citus, *pgtest.DB, *Store, uuid.UUID) {
	t.Helper()
	c := pgtest.SharedCitus(t)
	db := c.NewDB(t)
	s := New(db.App, Options{})
	t.Cleanup(s.Close)
	tenant := c.TenantOnEachWorker(t, db)[0]
	if _, _, _, err := s.Register(t.Context(), tenant, registry.ServerInfo{ModuleName: "m", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, 0); err != nil {
		t.Fatal(err)
	}
	return c, db, s, tenant
}

// closedPort returns a loopback port that nothing listens on.
func closedPort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return uint16(port)
}

// A position read on a worker carries the cluster's epoch (epoch.go), not
// the worker's own WAL timeline: with the coordinator's timeline known as
// 1<<20 and no worker's past its first, the store's reads on the worker (a
// position, a trail) give it, and a store that reads through the
// coordinator gives the cluster's own.
func TestWorkerReadsCarryTheClustersEpoch(t *testing.T) {
	_, db, s, tenant := storeWithOneEvent(t)
	ctx := t.Context()
	testwait.Until(t, "a read on the worker", 30*time.Second, func() bool {
		made := s.workerReads.made.Load()
		if _, err := s.Horizon(ctx, tenant); err != nil {
			t.Fatal(err)
		}
		return s.workerReads.made.Load() > made
	})
	const known = 1 << 20
	e := &s.epochState
	e.mu.Lock()
	e.coordinator, e.coordinatorAt = known, time.Now().Add(time.Hour)
	e.timelines, e.timelinesAt = map[int64]int64{1: 1, 2: 1}, time.Now().Add(time.Hour)
	e.mu.Unlock()
	p, err := s.Horizon(ctx, tenant)
	if err != nil || p.Epoch != known || p.Seq != 1 {
		t.Fatalf("a position read on the worker: %+v, %v; want epoch %d, seq 1", p, err, known)
	}
	for _, read := range []struct {
		name string
		read func() ([]registry.Position, []error)
	}{
		{"Horizons of the tenant twice", func() ([]registry.Position, []error) {
			return s.Horizons(ctx, []uuid.UUID{tenant, tenant})
		}},
		{"NodeHorizons", func() ([]registry.Position, []error) {
			return s.NodeHorizons(ctx, s.TenantNode(ctx, tenant), []uuid.UUID{tenant})
		}},
	} {
		positions, errs := read.read()
		for i, p := range positions {
			if errs[i] != nil || p.Epoch != known || p.Seq != 1 {
				t.Fatalf("%s on the worker: %+v, %v; want epoch %d, seq 1", read.name, p, errs[i], known)
			}
		}
	}
	batches, err := s.ReadFeed(ctx, []uuid.UUID{tenant}, []registry.Position{{}}, 10)
	if err != nil || len(batches) != 1 || batches[0].Horizon.Epoch != known || len(batches[0].Events) != 1 ||
		batches[0].Events[0].Position.Epoch != known {
		t.Fatalf("a trail read on the worker: %+v, %v; want every position of epoch %d", batches, err, known)
	}
	coordinator := New(db.App, Options{CoordinatorReads: true})
	t.Cleanup(coordinator.Close)
	if p, err := coordinator.Horizon(ctx, tenant); err != nil || p.Epoch == known || p.Seq != 1 {
		t.Fatalf("a position read through the coordinator: %+v, %v", p, err)
	}
}

// TestWorkerCallsFollowTheCoordinatorsList: a call is made on a worker's
// pool only while the coordinator lists the pool's address as the primary
// of the worker's group. A pool whose address it no longer lists (here:
// the store's record of the address changed under a pool that still
// reaches the worker) is dropped at the next call, which goes through the
// coordinator; the addresses are read again, and the calls go back to the
// worker at the address listed.
func TestWorkerCallsFollowTheCoordinatorsList(t *testing.T) {
	c, db, s, tenant := storeWithOneEvent(t)
	ctx := t.Context()
	group := workerGroupAt(t, db, c.Workers[0].Port())
	w := &s.workerReads
	n := 0
	register := func() {
		t.Helper()
		n++
		if _, _, _, err := s.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("m-%d", n), Version: "1.0.0"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	onWorker := func() bool {
		calls := w.writes.Load()
		register()
		return w.writes.Load() == calls+1
	}
	testwait.Until(t, "a registration made on the worker", 30*time.Second, onWorker)

	w.mu.Lock()
	node := w.nodes[group]
	listedPort := node.port
	node.port = closedPort(t)
	w.mu.Unlock()
	calls := w.writes.Load()
	register()
	if d := w.writes.Load() - calls; d != 0 {
		t.Fatalf("%d calls made on a pool whose address the coordinator does not list", d)
	}
	w.mu.Lock()
	kept := w.nodes[group] == node
	w.mu.Unlock()
	if kept {
		t.Fatal("the pool whose address the coordinator does not list was kept")
	}
	testwait.Until(t, "a registration made on the worker again", 30*time.Second, onWorker)
	w.mu.Lock()
	port := w.nodes[group].port
	w.mu.Unlock()
	if port != listedPort {
		t.Fatalf("calls made on the worker at port %d, want %d", port, listedPort)
	}
}
