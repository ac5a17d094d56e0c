package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// WorkerStandby makes a streaming standby of worker i of a private Citus
// cluster (NewCitus), for FailOverWorker: pg_basebackup -R from the worker,
// started on a loopback port of its own. With sync, the worker commits only
// what the standby has received. It is removed with the cluster.
func (c *Citus) WorkerStandby(t testing.TB, i int, sync bool) *Cluster {
	t.Helper()
	return c.standbyOf(t, c.Workers[i], fmt.Sprintf("worker %d", i), sync)
}

// CoordinatorStandby makes a streaming standby of the coordinator of a
// private Citus cluster (NewCitus), for PromoteCoordinator: as
// WorkerStandby does for a worker.
func (c *Citus) CoordinatorStandby(t testing.TB, sync bool) *Cluster {
	t.Helper()
	return c.standbyOf(t, c.Coordinator, "the coordinator", sync)
}

// standbyOf makes a streaming standby of node, one of c's, named name in
// messages; it is removed with the cluster.
func (c *Citus) standbyOf(t testing.TB, node *Cluster, name string, sync bool) *Cluster {
	t.Helper()
	start := time.Now()
	// The node's settings (Citus's library, its worker processes), which
	// a standby needs as its primary has them.
	s, err := node.startStandby(node.settings)
	if err != nil {
		t.Fatalf("pgtest: standby of %s: %v", name, err)
	}
	c.spares = append(c.spares, s)
	if sync {
		if err := node.syncTo(); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	t.Logf("pgtest: standby of %s (port %d) on 127.0.0.1:%d (synchronous: %v) ready in %v",
		name, node.port, s.port, sync, time.Since(start).Round(time.Millisecond))
	return s
}

// FailOverWorker fails worker i over onto standby (WorkerStandby), as an
// operator does: the worker stopped, the standby promoted, and the
// coordinator's metadata in database told the new address
// (citus_update_node). The standby then is worker i. Only database's
// metadata follows: the cluster's other databases, its template's too,
// still list the stopped worker, so a test makes no NewDB after it.
func (c *Citus) FailOverWorker(t testing.TB, i int, database string, standby *Cluster) {
	t.Helper()
	old := c.Workers[i]
	old.Stop(t)
	standby.Promote(t)
	c.moveNode(t, c.Coordinator, database, old, standby)
	c.Workers[i] = standby
}

// PromoteCoordinator makes standby (CoordinatorStandby) the coordinator,
// as an operator does once the coordinator is gone (Crash or Stop): the
// standby promoted, and the cluster's metadata in database, the
// workers' copies too, told the coordinator's new address
// (citus_update_node). The standby then is the coordinator; only
// database's metadata follows, as with FailOverWorker.
func (c *Citus) PromoteCoordinator(t testing.TB, database string, standby *Cluster) {
	t.Helper()
	old := c.Coordinator
	standby.Promote(t)
	c.moveNode(t, standby, database, old, standby)
	c.Coordinator = standby
}

// moveNode tells the metadata of database, through the coordinator
// coord, that the node of old is now at standby's port
// (citus_update_node), and makes old a spare, removed with the cluster,
// in standby's place.
func (c *Citus) moveNode(t testing.TB, coord *Cluster, database string, old, standby *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := newPool(ctx, coord.connString("", "", database))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer pool.Close()
	tag, err := pool.Exec(ctx, `SELECT citus_update_node(nodeid, '127.0.0.1', $2) FROM pg_dist_node WHERE nodeport = $1`,
		old.port, standby.port)
	if err != nil {
		t.Fatalf("pgtest: citus_update_node from port %d to %d: %v", old.port, standby.port, err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("pgtest: the node of port %d is not in the metadata of %s", old.port, database)
	}
	for j, s := range c.spares {
		if s == standby {
			c.spares[j] = old
		}
	}
}
