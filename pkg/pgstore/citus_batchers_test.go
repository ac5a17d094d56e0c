package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// On Citus the heartbeats of each worker that the store reaches directly
// go in batches of their own: while a heartbeat of one worker's tenant
// waits on a locked row, the other worker's tenant's heartbeats are
// applied one after another. Batches are never applied beside the one
// being applied here (an overlap of an hour) and a batch is never given
// up on (patientStall, a batch timeout of an hour): with one batcher for
// every worker, the free tenant's heartbeats would wait for the locked
// row.
func TestCitusHeartbeatBatchesPerWorker(t *testing.T) {
	c := pgtest.SharedCitus(t)
	db := c.NewDB(t)
	ctx := t.Context()
	st := pgstore.New(db.App, pgstore.Options{WorkerStall: patientStall, BatchOverlap: time.Hour, BatchTimeout: time.Hour})
	t.Cleanup(st.Close)
	tenants := c.TenantOnEachWorker(t, db)
	free, locked := tenants[0], tenants[1]
	freeSrv, lockedSrv := register(t, st, free, "free"), register(t, st, locked, "locked")
	for _, tenant := range tenants {
		// The store's pool to the tenant's worker is open, and the tenant's
		// worker known.
		testwait.Eventually(t, "a read on the tenant's worker", func() bool {
			made := st.ReadsOnWorkers()
			_, err := st.Horizon(ctx, tenant)
			return err == nil && st.ReadsOnWorkers() > made
		})
	}

	tx, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM mcp_servers WHERE tenant_id = $1 AND server_id = $2 FOR UPDATE`,
		locked, lockedSrv.ServerID); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, _, err := st.Heartbeat(ctx, locked, lockedSrv.ServerID)
		blocked <- err
	}()
	// The locked tenant's call waits for the row on its worker.
	w1, err := pgx.Connect(ctx, c.Workers[1].URL("", db.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w1.Close(context.Background()) }()
	testwait.Eventually(t, "the locked tenant's heartbeat waits for the row", func() bool {
		var n int
		return w1.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%mcp_heartbeat%'`).Scan(&n) == nil && n > 0
	})

	hctx, cancel := context.WithTimeout(ctx, testwait.Cap)
	defer cancel()
	for i := range 20 {
		if _, _, err := st.Heartbeat(hctx, free, freeSrv.ServerID); err != nil {
			t.Fatalf("heartbeat %d of the other worker's tenant while a heartbeat waits for a locked row: %v", i, err)
		}
	}
	select {
	case err := <-blocked:
		t.Fatalf("the locked tenant's heartbeat returned while its row was locked: %v", err)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the locked tenant's heartbeat after the lock: %v", err)
	}
}
