package pgstore_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// A Citus worker that fails over onto its standby starts a new history of
// its tenants' trails: promoted from an asynchronous standby, it may hand
// out again the positions of events it never received. So the feed's epoch
// moves on (epoch.go): every position handed out before answers 410
// (ErrPositionExpired) once, the worker's tenants' and the others' alike,
// as after a failover of plain PostgreSQL; positions read after it resume,
// and the tenants' trails go on on the promoted worker. With the store's
// pools to the workers and with every read through the coordinator
// (--citus-worker-reads=false), where the workers' timelines are read
// through the coordinator too; and onto a standby that did not receive the
// worker's last event, whose position the promoted worker then gives to
// another event.
func TestCitusWorkerFailoverExpiresPositions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts pgstore.Options
		lost bool
	}{
		{"worker reads", pgstore.Options{WorkerStall: patientStall}, false},
		{"coordinator reads", pgstore.Options{WorkerStall: patientStall, CoordinatorReads: true}, false},
		{"an event lost", pgstore.Options{WorkerStall: patientStall}, true},
	} {
		t.Run(tc.name, func(t *testing.T) { workerFailoverExpiresPositions(t, tc.opts, tc.lost) })
	}
}

func workerFailoverExpiresPositions(t *testing.T, opts pgstore.Options, lost bool) {
	c := pgtest.NewCitus(t)
	db := c.NewDB(t)
	st := pgstore.New(db.App, opts)
	t.Cleanup(st.Close)
	ctx := t.Context()
	tenants := c.TenantOnEachWorker(t, db) // tenants[0] on worker 0
	for _, tenant := range tenants {
		register(t, st, tenant, "before")
	}
	standby := c.WorkerStandby(t, 0, !lost)
	if lost {
		// The standby stops receiving: the worker's next event is not on it.
		conn, err := pgx.Connect(ctx, standby.URL("", "postgres"))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`ALTER SYSTEM SET primary_conninfo = ''`, `SELECT pg_reload_conf()`} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		testwait.Eventually(t, "the standby stopped receiving", func() bool {
			var n int
			return conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_wal_receiver`).Scan(&n) == nil && n == 0
		})
		_ = conn.Close(ctx)
		register(t, st, tenants[0], "lost")
	}
	if !opts.CoordinatorReads {
		testwait.Eventually(t, "a read on the worker", func() bool {
			made := st.ReadsOnWorkers()
			_, err := st.Horizon(ctx, tenants[0])
			return err == nil && st.ReadsOnWorkers() > made
		})
	}
	want := map[bool]int64{false: 1, true: 2}[lost]
	before := make([]registry.Position, len(tenants))
	for i, tenant := range tenants {
		p, err := st.Horizon(ctx, tenant)
		if err != nil || i == 0 && p.Seq != want || i == 1 && p.Seq != 1 {
			t.Fatalf("tenant %d before the failover: %+v, %v", i, p, err)
		}
		if _, err := st.CheckPosition(ctx, tenant, p); err != nil {
			t.Fatalf("tenant %d: its present position before the failover: %v", i, err)
		}
		before[i] = p
	}

	c.FailOverWorker(t, 0, db.Name, standby)

	// Within about a second of reads, every position carries the new epoch.
	testwait.Eventually(t, "the epoch moved on after the worker's failover", func() bool {
		p, err := st.Horizon(ctx, tenants[1])
		return err == nil && p.Epoch != before[1].Epoch
	})
	for i, tenant := range tenants {
		if _, err := st.CheckPosition(ctx, tenant, before[i]); !errors.Is(err, registry.ErrPositionExpired) {
			t.Errorf("tenant %d: a position of before the failover: %v, want ErrPositionExpired", i, err)
		}
	}
	// The worker's tenant writes on the promoted standby; its trail goes
	// on there, and positions of the new epoch resume.
	testwait.Eventually(t, "a registration on the promoted worker", func() bool {
		_, _, _, err := st.Register(ctx, tenants[0], registry.ServerInfo{ModuleName: "after", Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}}, 0)
		return err == nil
	})
	for i, tenant := range tenants {
		now, err := st.Horizon(ctx, tenant)
		if err != nil || now.Epoch == before[i].Epoch {
			t.Fatalf("tenant %d after the failover: %+v, %v", i, now, err)
		}
		if _, err := st.CheckPosition(ctx, tenant, now); err != nil {
			t.Errorf("tenant %d: its present position after the failover: %v", i, err)
		}
		batches, err := st.ReadFeed(ctx, []uuid.UUID{tenant}, []registry.Position{{}}, 10)
		if err != nil || len(batches) != 1 || batches[0].Horizon != now {
			t.Fatalf("tenant %d: the trail after the failover: %+v, %v; want its horizon %+v", i, batches, err, now)
		}
		for _, ev := range batches[0].Events {
			if ev.Position.Epoch != now.Epoch {
				t.Errorf("tenant %d: event %+v of another epoch than %d", i, ev.Position, now.Epoch)
			}
		}
	}
	// Lost, the worker's last event has its position taken by the next.
	if now, _ := st.Horizon(ctx, tenants[0]); now.Seq != 2 {
		t.Errorf("the failed-over worker's tenant: position %d, want 2 (its registration before and after)", now.Seq)
	}
	batches, err := st.ReadFeed(ctx, tenants[:1], []registry.Position{{}}, 10)
	if err != nil || len(batches) != 1 || len(batches[0].Events) != 2 || batches[0].Events[1].ModuleName != "after" {
		t.Fatalf("the failed-over worker's tenant's trail: %+v, %v; want before, after", batches, err)
	}
	// A list's position agrees (the registry's ETag and watch_cursor).
	page, err := st.Servers(ctx, tenants[1], registry.ServerFilter{Limit: 10})
	if err != nil || page.Horizon.Epoch == before[1].Epoch {
		t.Errorf("a list's position after the failover: %+v, %v", page.Horizon, err)
	}
}
