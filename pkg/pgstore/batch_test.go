package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/heartbeat"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/pgtest"
)

// registerServers registers n servers of each of tenants tenants and
// returns them.
func registerServers(t *testing.T, st *pgstore.Store, tenants, n int) []heartbeat.Server {
	t.Helper()
	var out []heartbeat.Server
	for range tenants {
		tenant := uuid.New()
		for i := range n {
			srv, _, _, err := st.Register(t.Context(), tenant, heartbeat.ServerInfo{ModuleName: fmt.Sprintf("m%d", i),
				Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, srv)
		}
	}
	return out
}

// Concurrent heartbeats of many tenants, through few batches in flight and
// small batches, are each answered with their own server; one of a server
// unknown to its tenant with ErrNotFound.
func TestHeartbeatBatchesConcurrent(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	st := pgstore.New(db.App, pgstore.Options{Clock: clockwork.NewFakeClockAt(epoch), Flushers: 2, MaxBatch: 4})
	t.Cleanup(st.Close)
	servers := registerServers(t, st, 6, 5)
	var wg sync.WaitGroup
	errs := make(chan error, len(servers)*10+10)
	for _, srv := range servers {
		wg.Go(func() {
			for range 10 {
				got, _, err := st.Heartbeat(t.Context(), srv.TenantID, srv.ServerID)
				if err != nil || got.ServerID != srv.ServerID || got.Status != heartbeat.StatusHealthy {
					errs <- fmt.Errorf("heartbeat of %s: %+v, %v", srv.ServerID, got, err)
					return
				}
			}
		})
	}
	for range 10 {
		wg.Go(func() {
			// Another tenant's server: not found, whatever batch it is in.
			if _, _, err := st.Heartbeat(t.Context(), uuid.New(), servers[0].ServerID); !errors.Is(err, heartbeat.ErrNotFound) {
				errs <- fmt.Errorf("heartbeat under another tenant: %v; want ErrNotFound", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// While the only batch allowed in flight waits on a row lock, later
// heartbeats queue: one whose context ends leaves the queue, the others are
// sent as one batch once the first has committed, and Close fails what is
// queued then.
func TestHeartbeatQueueHandOffAndCancel(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := t.Context()
	st := pgstore.New(db.App, pgstore.Options{Clock: clockwork.NewFakeClockAt(epoch), Flushers: 1})
	t.Cleanup(st.Close)
	servers := registerServers(t, st, 1, 4)

	tx, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM mcp_servers WHERE server_id = $1 FOR UPDATE`, servers[0].ServerID); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, _, err := st.Heartbeat(ctx, servers[0].TenantID, servers[0].ServerID)
		first <- err
	}()
	waitForLock(t, db.Admin)

	// Queued behind the locked batch: a heartbeat whose context ends.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := st.Heartbeat(short, servers[1].TenantID, servers[1].ServerID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued heartbeat whose context ended: %v; want the deadline", err)
	}
	// Two more queue, then the lock goes.
	rest := make(chan error, 2)
	for _, srv := range servers[2:] {
		go func() {
			got, _, err := st.Heartbeat(ctx, srv.TenantID, srv.ServerID)
			if err == nil && got.ServerID != srv.ServerID {
				err = fmt.Errorf("answered with %s, want %s", got.ServerID, srv.ServerID)
			}
			rest <- err
		}()
	}
	time.Sleep(20 * time.Millisecond) // let them queue (they succeed either way)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the locked heartbeat: %v", err)
	}
	for range 2 {
		if err := <-rest; err != nil {
			t.Fatalf("a queued heartbeat: %v", err)
		}
	}
	var beat time.Time
	if err := db.Admin.QueryRow(ctx, `SELECT last_heartbeat_at FROM mcp_servers WHERE server_id = $1`,
		servers[1].ServerID).Scan(&beat); err != nil {
		t.Fatal(err)
	}
	if beat.After(servers[1].LastHeartbeatAt) {
		t.Fatalf("the abandoned heartbeat was applied: %v after %v", beat, servers[1].LastHeartbeatAt)
	}

	st.Close()
	if _, _, err := st.Heartbeat(ctx, servers[0].TenantID, servers[0].ServerID); !errors.Is(err, heartbeat.ErrUnavailable) {
		t.Fatalf("heartbeat after Close: %v; want ErrUnavailable", err)
	}
}

// waitForLock waits until a session of the database waits for a lock (the
// heartbeat's statement on the locked row), for 10 s at most.
func waitForLock(t *testing.T, admin *pgxpool.Pool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("no heartbeat waits for the row lock")
}

// A store starts no goroutine of its own: heartbeats are sent by their
// callers.
func TestStoreStartsNoGoroutine(t *testing.T) {
	db := pgtest.NewDB(t)
	before := runtime.NumGoroutine()
	var stores []*pgstore.Store
	for range 50 {
		stores = append(stores, pgstore.New(db.App, pgstore.Options{}))
	}
	after := runtime.NumGoroutine()
	for _, st := range stores {
		st.Close()
	}
	if after-before >= 50 {
		t.Fatalf("50 stores started %d goroutines", after-before)
	}
}
