package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
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
				result, err := st.Sweep(ctx, store.SweepRequest{Now: epoch, Interval: 10 * time.Second, Limit: lifecycle.DefaultSweepBatch})
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
				result, err := st.Sweep(ctx, store.SweepRequest{Now: epoch, Interval: 10 * time.Second, Limit: 2 * n / 100})
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
	var byTenant, spread []heartbeatTarget
	rows, err := db.Admin.Query(ctx, `SELECT tenant_id, server_id FROM mcp_servers ORDER BY module_name, tenant_id`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var t heartbeatTarget
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
	// The store's default query mode, which a pooler in transaction mode
	// allows (describe once, unnamed statements), and the driver's own
	// default (named prepared statements, kept by one server session).
	// exec, which describes nothing, cannot encode the batch's uuid[]
	// parameters.
	for _, mode := range []string{"", "cache_statement"} {
		name := "mode=" + mode
		if mode == "" {
			name = "mode=default"
		}
		b.Run(name, func(b *testing.B) { benchHeartbeat(b, db, mode, byTenant, spread) })
	}
}

type heartbeatTarget struct{ tenant, server uuid.UUID }

func benchHeartbeat(b *testing.B, db *pgtest.DB, mode string, byTenant, spread []heartbeatTarget) {
	ctx := context.Background()
	url := db.AppURL
	if mode != "" {
		url += "&default_query_exec_mode=" + mode
	}
	pool, err := pgstore.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	st := pgstore.New(pool, pgstore.Options{Clock: clockwork.NewFakeClockAt(epoch)})
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
		targets []heartbeatTarget
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

// BenchmarkRegisterAtQuota registers new modules in a tenant of 10,000 live
// servers, with the quota (the tenant's count locked and read) and
// without it.
func BenchmarkRegisterAtQuota(b *testing.B) {
	for _, quota := range []int{0, 20_000} {
		b.Run(fmt.Sprintf("quota=%d", quota), func(b *testing.B) {
			db := pgtest.NewDB(b)
			seed(b, db, 1, 10_000)
			// As heartbeats leave them: rows updated since the last vacuum.
			if _, err := db.Admin.Exec(context.Background(), `UPDATE mcp_servers SET last_heartbeat_at = now()`); err != nil {
				b.Fatal(err)
			}
			st := pgstore.New(db.App, pgstore.Options{})
			b.Cleanup(st.Close)
			tenant := uuid.MustParse(pgtestTenant(b, db))
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				_, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{
					ModuleName: fmt.Sprintf("new-%d", i), Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
				}, quota)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// pgtestTenant is the tenant seed gave its servers.
func pgtestTenant(b *testing.B, db *pgtest.DB) string {
	b.Helper()
	var id string
	if err := db.Admin.QueryRow(context.Background(), `SELECT md5('tenant' || 1)::uuid::text`).Scan(&id); err != nil {
		b.Fatal(err)
	}
	return id
}

// BenchmarkServersPageOfLargeServers lists the first page (limit 1000) of
// a tenant of 1,000 servers whose advertisements are 244 KB of
// incompressible text each: the page stops at registry.MaxPageBytes and
// reads no other payload.
func BenchmarkServersPageOfLargeServers(b *testing.B) {
	db := pgtest.NewDB(b)
	ctx := context.Background()
	tenant := uuid.New()
	if _, err := db.Admin.Exec(ctx, `
INSERT INTO mcp_servers (server_id, tenant_id, module_name, version, supported_protocols, status,
                         capability_advertisement, last_heartbeat_at, registered_at, trace_id)
SELECT gen_random_uuid(), $1, 'module-' || lpad(m::text, 4, '0'), '1.0.0', ARRAY['2025-06-18'], 'healthy',
       jsonb_build_object('blob', (SELECT string_agg(md5(random()::text || k || m.m), '') FROM generate_series(1, 7600) k)),
       now(), now(), md5(m::text)
FROM generate_series(1, 1000) m(m)`, tenant); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE mcp_servers`); err != nil {
		b.Fatal(err)
	}
	st := pgstore.New(db.App, pgstore.Options{})
	b.Cleanup(st.Close)
	// limit=18 is the same page bounded by count alone: what reading
	// the page's own payloads costs.
	for _, limit := range []int{registry.MaxPageLimit, 18} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				page, err := st.Servers(ctx, tenant, registry.ServerFilter{Limit: limit})
				if err != nil {
					b.Fatal(err)
				}
				if page.Next == nil || len(page.Servers) > 20 {
					b.Fatalf("%d servers, next %v: want a page bounded by bytes", len(page.Servers), page.Next)
				}
				b.ReportMetric(float64(len(page.Servers)), "servers/page")
			}
		})
	}
}

// BenchmarkListPages times the list reads per page at the store, with the
// CPU that PostgreSQL spent on each (pg-cpu-µs/op, from /proc: the
// shared cluster's backends): a page of 100 servers of a tenant of 100, a
// page of 100 while paging a tenant of 10,000, and a page of 100 events
// of the audit trail. Each page also reads the feed's horizon.
func BenchmarkListPages(b *testing.B) {
	db := pgtest.NewDB(b)
	seed(b, db, 1, 100)
	ctx := context.Background()
	small := uuid.MustParse(pgtestTenant(b, db))
	big := uuid.New()
	if _, err := db.Admin.Exec(ctx, `
INSERT INTO mcp_servers (server_id, tenant_id, module_name, version, supported_protocols, status,
                         last_heartbeat_at, registered_at, trace_id)
SELECT gen_random_uuid(), $1, 'module-' || lpad(m::text, 5, '0'), '1.0.0', ARRAY['2025-06-18'], 'healthy',
       now(), now(), md5(m::text)
FROM generate_series(1, 10000) m`, big); err != nil {
		b.Fatal(err)
	}
	st := pgstore.New(db.App, pgstore.Options{})
	b.Cleanup(st.Close)
	trail := uuid.New()
	for i := range 300 {
		if _, _, _, err := st.Register(ctx, trail, registry.ServerInfo{
			ModuleName: fmt.Sprintf("module-%03d", i), Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"},
		}, 0); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE mcp_servers, mcp_audit_events`); err != nil {
		b.Fatal(err)
	}
	postmaster := pgtest.Shared(b).PID()
	run := func(b *testing.B, page func() error) {
		b.ReportAllocs()
		for range 20 { // plans and caches of the pool's connections
			if err := page(); err != nil {
				b.Fatal(err)
			}
		}
		cpu0 := childrenCPU(postmaster)
		b.ResetTimer()
		for range b.N {
			if err := page(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric((childrenCPU(postmaster)-cpu0).Seconds()*1e6/float64(b.N), "pg-cpu-µs/op")
	}
	b.Run("servers=100", func(b *testing.B) {
		run(b, func() error {
			page, err := st.Servers(ctx, small, registry.ServerFilter{Limit: 100})
			if err == nil && len(page.Servers) != 100 {
				err = fmt.Errorf("%d servers, want 100", len(page.Servers))
			}
			return err
		})
	})
	b.Run("paging-10000", func(b *testing.B) {
		var next *registry.ServerCursor
		run(b, func() error {
			page, err := st.Servers(ctx, big, registry.ServerFilter{Limit: 100, After: next})
			if err == nil && len(page.Servers) == 0 {
				err = errors.New("an empty page")
			}
			next = page.Next // from the start again after the last page
			return err
		})
	})
	b.Run("feed-poll", func(b *testing.B) {
		// What the hub reads every poll for a watched tenant with nothing
		// new: its position and no event.
		h, err := st.Horizon(ctx, trail)
		if err != nil {
			b.Fatal(err)
		}
		run(b, func() error {
			bs, err := st.ReadFeed(ctx, []uuid.UUID{trail}, []registry.Position{h}, 1000)
			if err == nil && (len(bs) != 1 || len(bs[0].Events) != 0) {
				err = fmt.Errorf("feed poll: %+v", bs)
			}
			return err
		})
	})
	b.Run("events=100", func(b *testing.B) {
		run(b, func() error {
			page, err := st.Events(ctx, trail, registry.EventFilter{Limit: 100})
			if err == nil && len(page.Events) != 100 {
				err = fmt.Errorf("%d events, want 100", len(page.Events))
			}
			return err
		})
	})
}

// childrenCPU is the CPU time (user and system) of the processes whose
// parent is pid: a PostgreSQL cluster's backends.
func childrenCPU(pid int) time.Duration {
	ents, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// state(0) ppid(1) ... utime(11) stime(12)
		if len(f) < 13 || f[1] != strconv.Itoa(pid) {
			continue
		}
		for _, v := range f[11:13] {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}
