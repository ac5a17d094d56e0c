package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// backendCPU is the CPU time (user + system) the PostgreSQL backend pid
// has used, from /proc: what a statement costs the server, apart from the
// round trip and the client.
func backendCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("the backend's CPU time cannot be read: %v", err)
	}
	// The fields after the command, which is in parentheses.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// BenchmarkAvailability measures the availability reads on PostgreSQL
// through one connection, whose backend's CPU time is read from /proc:
// pg-cpu-ms/op is PostgreSQL's CPU per call, ns/op the wall clock of the
// call (round trip and client included), p99-ms the 99th percentile of it.
// The tenant has 100 servers over 30 days: one with 10,000 transitions
// (recovering and going unhealthy every 8.6 minutes), 99 with about 200.
func BenchmarkAvailability(b *testing.B) {
	ctx := context.Background()
	db := pgtest.NewDB(b)
	cfg, err := pgxpool.ParseConfig(db.AppURL)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = 1, 1
	cfg.ConnConfig.DefaultQueryExecMode = pgstore.DefaultQueryExecMode
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	start := epoch.Add(-30 * 24 * time.Hour)
	clock := clockwork.NewFakeClockAt(start)
	st := pgstore.New(pool, pgstore.Options{Clock: clock})
	defer st.Close()

	tenant := uuid.New()
	ids := make([]uuid.UUID, 100)
	for i := range ids {
		srv, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("server-%03d", i),
			Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "search"}}}, 0)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = srv.ServerID
	}
	busy := ids[0]
	const cycles = 5000
	step := 30 * 24 * time.Hour / cycles
	for i := range cycles {
		clock.Advance(step / 2)
		if _, err := st.Sweep(ctx, store.SweepRequest{Interval: registry.DefaultHeartbeatInterval, Limit: 1000}); err != nil {
			b.Fatal(err)
		}
		clock.Advance(step - step/2)
		beat := ids[:1]
		if i%50 == 0 {
			beat = ids
		}
		var wg sync.WaitGroup
		for _, id := range beat {
			wg.Go(func() {
				if _, _, err := st.Heartbeat(ctx, tenant, id); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	// What autovacuum does to an append-only table: the visibility map
	// that lets the reads be index-only.
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE mcp_audit_events`); err != nil {
		b.Fatal(err)
	}
	a, err := st.ServerAvailability(ctx, tenant, busy, registry.AvailabilityRequest{Window: registry.Window30d})
	if err != nil {
		b.Fatal(err)
	}
	if a.Transitions < 9990 {
		b.Fatalf("%d transitions in 30 days, want 10,000", a.Transitions)
	}
	b.Logf("30d of the busy server: %d transitions, ratio %v, %d outages listed", a.Transitions, *a.AvailableRatio, len(a.Outages))
	explain := func(sql string, args ...any) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SELECT set_config('auth.tenant_id', $1, true)`, tenant.String()); err != nil {
			b.Fatal(err)
		}
		rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) `+sql, args...)
		if err != nil {
			b.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				b.Fatal(err)
			}
			plan = append(plan, line)
		}
		b.Logf("EXPLAIN ANALYZE:\n%s", strings.Join(plan, "\n"))
	}
	to := clock.Now().UTC().Truncate(time.Microsecond)
	explain(pgstore.ServerAvailabilitySQL, tenant, busy, to.Add(-30*24*time.Hour), to, 2*registry.MaxOutages)
	explain(pgstore.AvailabilityRatiosSQL, tenant, ids, to.Add(-24*time.Hour), to)
	var pid int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}

	measure := func(b *testing.B, call func() error) {
		durations := make([]time.Duration, 0, b.N)
		cpu0 := backendCPU(b, pid)
		b.ResetTimer()
		for b.Loop() {
			t0 := time.Now()
			if err := call(); err != nil {
				b.Fatal(err)
			}
			durations = append(durations, time.Since(t0))
		}
		b.StopTimer()
		cpu := backendCPU(b, pid) - cpu0
		slices.Sort(durations)
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(durations)), "pg-cpu-ms/op")
		b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.Run("server-30d-10k-transitions", func(b *testing.B) {
		measure(b, func() error {
			_, err := st.ServerAvailability(ctx, tenant, busy, registry.AvailabilityRequest{Window: registry.Window30d})
			return err
		})
	})
	b.Run("server-24h", func(b *testing.B) {
		measure(b, func() error {
			_, err := st.ServerAvailability(ctx, tenant, busy, registry.AvailabilityRequest{Window: registry.Window24h})
			return err
		})
	})
	b.Run("ratios-100-servers-24h", func(b *testing.B) {
		measure(b, func() error {
			r, err := st.AvailabilityRatios(ctx, tenant, ids, registry.AvailabilityRequest{Window: registry.Window24h})
			if err == nil && len(r) != len(ids) {
				err = fmt.Errorf("%d ratios, want %d", len(r), len(ids))
			}
			return err
		})
	})
	b.Run("skill-of-100-servers-24h", func(b *testing.B) {
		measure(b, func() error {
			_, err := st.SkillAvailability(ctx, tenant, "search", registry.AvailabilityRequest{Window: registry.Window24h})
			return err
		})
	})
}
