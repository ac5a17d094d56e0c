package pgstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/heartbeat"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/pgtest"
)

// seed fills db with tenants x modules healthy servers, two skills each,
// all heartbeating at epoch.
func seed(b *testing.B, db *pgtest.DB, tenants, modules int) {
	b.Helper()
	ctx := context.Background()
	_, err := db.Admin.Exec(ctx, `
INSERT INTO mcp_servers (server_id, tenant_id, module_name, version, supported_protocols, status,
                         last_heartbeat_at, registered_at, trace_id)
SELECT gen_random_uuid(), md5('tenant' || t)::uuid, 'module-' || m, '1.0.0', ARRAY['2025-06-18'], 'healthy',
       $1::timestamptz, $1::timestamptz, md5(t || '/' || m)
FROM generate_series(1, $2) t, generate_series(1, $3) m`, epoch, tenants, modules)
	if err != nil {
		b.Fatal(err)
	}
	_, err = db.Admin.Exec(ctx, `
INSERT INTO mcp_skills (skill_id, tenant_id, server_id, name)
SELECT gen_random_uuid(), s.tenant_id, s.server_id, k.name
FROM mcp_servers s, (VALUES ('search'), ('summarize')) k(name)`)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE mcp_servers`); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE mcp_skills`); err != nil {
		b.Fatal(err)
	}
}

// makeDue puts every dueEvery-th server back to healthy, 35 s silent, with
// its skills available, outside the timed part.
func makeDue(b *testing.B, db *pgtest.DB, dueEvery int) {
	b.Helper()
	ctx := context.Background()
	if _, err := db.Admin.Exec(ctx, `
WITH due AS (
    SELECT server_id FROM (SELECT server_id, row_number() OVER (ORDER BY server_id) AS n FROM mcp_servers) x
    WHERE n % $2 = 0
), srv AS (
    UPDATE mcp_servers s SET status = 'healthy', last_heartbeat_at = $1::timestamptz - interval '35 seconds'
    FROM due WHERE s.server_id = due.server_id
)
UPDATE mcp_skills k SET available = true, unavailable_reason = NULL FROM due WHERE k.server_id = due.server_id`,
		epoch, dueEvery); err != nil {
		b.Fatal(err)
	}
	// What autovacuum does between sweeps in a running registry.
	if _, err := db.Admin.Exec(ctx, `VACUUM mcp_servers, mcp_skills`); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkSweep(b *testing.B) {
	for _, size := range []struct{ tenants, modules int }{{100, 100}, {1000, 100}} {
		n := size.tenants * size.modules
		db := pgtest.NewDB(b)
		seed(b, db, size.tenants, size.modules)
		st := pgstore.New(db.App, pgstore.Options{})
		b.Cleanup(st.Close)
		ctx := context.Background()
		b.Run(fmt.Sprintf("servers=%d/due=none", n), func(b *testing.B) {
			for b.Loop() {
				result, err := st.Sweep(ctx, heartbeat.SweepRequest{Now: epoch, Interval: 10 * time.Second, Limit: heartbeat.DefaultSweepBatch})
				evs := result.Events
				if err != nil || len(evs) != 0 {
					b.Fatalf("sweep: %d events, %v", len(evs), err)
				}
			}
		})
		b.Run(fmt.Sprintf("servers=%d/due=1pct", n), func(b *testing.B) {
			// A counted loop, not b.Loop: the set-up of each pass must stay
			// out of the timing.
			for range b.N {
				b.StopTimer()
				makeDue(b, db, 100)
				b.StartTimer()
				result, err := st.Sweep(ctx, heartbeat.SweepRequest{Now: epoch, Interval: 10 * time.Second, Limit: 2 * n / 100})
				evs := result.Events
				if err != nil || len(evs) != n/100 {
					b.Fatalf("sweep: %d events, want %d, %v", len(evs), n/100, err)
				}
			}
		})
	}
}

// BenchmarkHeartbeat times heartbeats through the store's group commit:
// one at a time, 16 at once on one tenant's servers, and 16 at once with
// successive heartbeats on servers of different tenants, as a large
// fleet's heartbeats arrive.
func BenchmarkHeartbeat(b *testing.B) {
	const tenants, modules = 10, 100
	db := pgtest.NewDB(b)
	seed(b, db, tenants, modules)
	ctx := context.Background()
	type target struct{ tenant, server uuid.UUID }
	var byTenant, spread []target
	rows, err := db.Admin.Query(ctx, `SELECT tenant_id, server_id FROM mcp_servers ORDER BY module_name, tenant_id`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var t target
		if err := rows.Scan(&t.tenant, &t.server); err != nil {
			b.Fatal(err)
		}
		spread = append(spread, t)
	}
	if rows.Err() != nil || len(spread) != tenants*modules {
		b.Fatalf("seeded %d servers, want %d: %v", len(spread), tenants*modules, rows.Err())
	}
	for _, t := range spread {
		if t.tenant == spread[0].tenant {
			byTenant = append(byTenant, t)
		}
	}
	st := pgstore.New(db.App, pgstore.Options{Clock: clockwork.NewFakeClockAt(epoch)})
	b.Cleanup(st.Close)
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			t := byTenant[i%len(byTenant)]
			if _, _, err := st.Heartbeat(ctx, t.tenant, t.server); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	for _, c := range []struct {
		name    string
		targets []target
	}{{"parallel", byTenant}, {"parallel-spread", spread}} {
		b.Run(c.name, func(b *testing.B) {
			var next atomic.Int64
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t := c.targets[int(next.Add(1))%len(c.targets)]
					if _, _, err := st.Heartbeat(ctx, t.tenant, t.server); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
