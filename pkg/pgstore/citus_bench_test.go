package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// benchEngine is an engine that the benchmarks of this file compare.
type benchEngine struct {
	name string
	db   func(b *testing.B) *pgtest.DB
}

// benchEngines are plain PostgreSQL and the test Citus cluster.
var benchEngines = []benchEngine{
	{"plain", func(b *testing.B) *pgtest.DB { return pgtest.NewDB(b) }},
	{"citus", func(b *testing.B) *pgtest.DB { return pgtest.SharedCitus(b).NewDB(b) }},
}

// open returns a fresh database of e and a store on it as cyberos_app.
func (e benchEngine) open(b *testing.B) (*pgtest.DB, *pgstore.Store) {
	b.Helper()
	db := e.db(b)
	st := pgstore.New(db.App, pgstore.Options{})
	b.Cleanup(st.Close)
	return db, st
}

// BenchmarkCitusVsPlain measures the same loads on plain PostgreSQL and on
// the test Citus cluster (a coordinator and two workers on this machine):
// registering 2,000 servers of two tenants (serial, through cyberos_app),
// and heartbeats of those servers from 16 concurrent callers.
func BenchmarkCitusVsPlain(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			ctx := context.Background()
			_, st := e.open(b)
			tenants := []uuid.UUID{uuid.New(), uuid.New()}
			var targets []benchTarget
			start := time.Now()
			for i := range 2000 {
				tenant := tenants[i%2]
				srv, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("m%04d", i),
					Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "s"}}}, 0)
				if err != nil {
					b.Fatal(err)
				}
				targets = append(targets, benchTarget{tenant, srv.ServerID})
			}
			registered := time.Since(start)
			heartbeatFrom(b, st, targets, 16)
			b.StopTimer()
			b.ReportMetric(registered.Seconds(), "register-2000-s")
		})
	}
}

// benchTarget is a server a benchmark heartbeats.
type benchTarget struct{ tenant, server uuid.UUID }

// heartbeatFrom times b.N heartbeats of targets, in turn, from callers
// side by side.
func heartbeatFrom(b *testing.B, st *pgstore.Store, targets []benchTarget, callers int) {
	b.Helper()
	ctx := context.Background()
	var (
		wg   sync.WaitGroup
		next = make(chan int)
	)
	b.ResetTimer()
	for range callers {
		wg.Go(func() {
			for i := range next {
				t := targets[i%len(targets)]
				if _, _, err := st.Heartbeat(ctx, t.tenant, t.server); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := 0; b.Loop(); i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// BenchmarkHorizon measures the read a held heartbeat waits for (the
// feed hub's horizon read, lifecycle's Current), one caller at a time,
// on plain PostgreSQL and on the test Citus cluster: one tenant's
// position (Store.Horizon), and the positions of 2, 8 and 32 tenants of
// one worker in one read (Store.ReadFeed asking for no event) and each
// apart in one call (Store.Horizons), the two ways the hub reads the
// tenants whose callers wait together. Besides ns/op (wall
// clock of one call), busy-µs/op is the whole machine's busy CPU time
// per call (client and every node), from /proc/stat, which counts in
// 10 ms ticks: run a few thousand calls (-benchtime 3000x).
func BenchmarkHorizon(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			ctx := context.Background()
			db, st := e.open(b)
			tenants := make([]uuid.UUID, 32)
			for i := range tenants {
				tenants[i] = uuid.New()
			}
			if e.name == "citus" {
				tenants = pgtest.SharedCitus(b).TenantsOnWorker(b, db, 0, len(tenants))
			}
			for i, tenant := range tenants {
				if _, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("m%d", i),
					Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("one", func(b *testing.B) {
				measureBusy(b, func() error {
					_, err := st.Horizon(ctx, tenants[0])
					return err
				})
			})
			for _, n := range []int{2, 8, 32} {
				b.Run(fmt.Sprintf("apart-%d", n), func(b *testing.B) {
					measureBusy(b, func() error {
						_, errs := st.Horizons(ctx, tenants[:n])
						return errors.Join(errs...)
					})
				})
				after := make([]registry.Position, n)
				for i := range after {
					after[i] = registry.Position{Seq: math.MaxInt64}
				}
				b.Run(fmt.Sprintf("together-%d", n), func(b *testing.B) {
					measureBusy(b, func() error {
						_, err := st.ReadFeed(ctx, tenants[:n], after, 1)
						return err
					})
				})
			}
		})
	}
}

// measureBusy runs call in b's loop, reports the machine's busy CPU time
// per call (busy-µs/op) and returns it.
func measureBusy(b *testing.B, call func() error) time.Duration {
	b.Helper()
	before := machineBusy(b)
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	perCall := (machineBusy(b) - before) / time.Duration(b.N)
	b.ReportMetric(float64(perCall.Nanoseconds())/1e3, "busy-µs/op")
	return perCall
}

// machineBusy is the busy time of every CPU of the machine so far, from
// /proc/stat (idle and iowait excluded).
func machineBusy(b *testing.B) time.Duration {
	b.Helper()
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Skipf("no /proc/stat: %v", err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	var ticks int64
	for i, field := range strings.Fields(line)[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %q: %v", line, err)
		}
		ticks += n
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(ticks) * 10 * time.Millisecond
}

// BenchmarkRegisterConcurrent measures registrations as the bench's Citus
// row set makes them on the store path: servers of 20 tenants, two
// skills each, from 8 concurrent callers, on plain PostgreSQL and on the
// test Citus cluster (where registrations of one worker share calls).
// Besides ns/op (wall clock per registration, the callers together),
// busy-µs/op is the whole machine's busy CPU time per registration, from
// /proc/stat: run a few thousand (-benchtime 4000x).
func BenchmarkRegisterConcurrent(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			_, st := e.open(b)
			tenants := benchTenants(concurrentTenants)
			runConcurrent(b, func(ctx context.Context, i int) error {
				_, _, _, err := st.Register(ctx, tenants[i%len(tenants)], concurrentServer(i), 0)
				return err
			})
		})
	}
}

// BenchmarkDeregisterConcurrent measures deregistrations of servers
// registered as BenchmarkRegisterConcurrent registers them (not timed),
// from 8 concurrent callers, on both engines; ns/op and busy-µs/op as
// there.
func BenchmarkDeregisterConcurrent(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			ctx := context.Background()
			_, st := e.open(b)
			tenants := benchTenants(concurrentTenants)
			servers := make([]uuid.UUID, b.N)
			for i := range servers {
				srv, _, _, err := st.Register(ctx, tenants[i%len(tenants)], concurrentServer(i), 0)
				if err != nil {
					b.Fatal(err)
				}
				servers[i] = srv.ServerID
			}
			runConcurrent(b, func(ctx context.Context, i int) error {
				_, ev, err := st.Deregister(ctx, tenants[i%len(tenants)], servers[i])
				if err == nil && ev == nil {
					err = fmt.Errorf("server %d: no deregistered event", i)
				}
				return err
			})
		})
	}
}

// concurrentTenants is how many tenants the concurrent benchmarks' servers
// belong to.
const concurrentTenants = 20

func benchTenants(n int) []uuid.UUID {
	tenants := make([]uuid.UUID, n)
	for i := range tenants {
		tenants[i] = uuid.New()
	}
	return tenants
}

// concurrentServer is the i-th server of the concurrent benchmarks.
func concurrentServer(i int) registry.ServerInfo {
	return registry.ServerInfo{ModuleName: fmt.Sprintf("module-%06d", i), Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"},
		Skills:             []registry.SkillInfo{{Name: "search"}, {Name: "summarize"}}}
}

// runConcurrent times b.N calls of call (i from 0) from 8 callers, and
// reports the machine's busy CPU time per call.
func runConcurrent(b *testing.B, call func(ctx context.Context, i int) error) {
	const callers = 8
	var (
		ctx    = context.Background()
		next   atomic.Int64
		wg     sync.WaitGroup
		n      = int64(b.N)
		before = machineBusy(b)
	)
	b.ResetTimer()
	for range callers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				if err := call(ctx, int(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric((machineBusy(b)-before).Seconds()*1e6/float64(b.N), "busy-µs/op")
}

// BenchmarkSweepManyTenantsDue measures a sweep's work when many tenants
// are due at once (a mass outage): 1,000 tenants of one silent server
// each (two skills), half of them past 2I and half past 3I, cleared by
// sweeps as the monitor makes them (the blind-window rule on, a batch of
// DefaultSweepBatch) until every server moved, on plain PostgreSQL and on
// the test Citus cluster. ns/transition is wall clock per transition,
// busy-µs/transition the whole machine's busy CPU per transition, from
// /proc/stat. Each pass puts the servers back first (not timed).
func BenchmarkSweepManyTenantsDue(b *testing.B) {
	const tenants = 1000
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			ctx := context.Background()
			db, st := e.open(b)
			for i, tenant := range benchTenants(tenants) {
				if _, _, _, err := st.Register(ctx, tenant, concurrentServer(i), 0); err != nil {
					b.Fatal(err)
				}
			}
			req := store.SweepRequest{Interval: 10 * time.Second, Limit: lifecycle.DefaultSweepBatch, BlindAfter: time.Hour}
			var (
				moved int
				busy  time.Duration
			)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				now := time.Now()
				if _, err := db.Admin.Exec(ctx, `UPDATE mcp_servers SET status = 'healthy',
					last_heartbeat_at = CASE WHEN module_name < 'module-000500' THEN $1::timestamptz ELSE $2::timestamptz END`,
					now.Add(-25*time.Second), now.Add(-35*time.Second)); err != nil {
					b.Fatal(err)
				}
				if _, err := db.Admin.Exec(ctx, `UPDATE mcp_skills SET available = true, unavailable_reason = NULL`); err != nil {
					b.Fatal(err)
				}
				before := machineBusy(b)
				b.StartTimer()
				pass := 0
				for sweeps := 0; pass < tenants; sweeps++ {
					if sweeps == 100 {
						b.Fatalf("100 sweeps moved %d of %d servers", pass, tenants)
					}
					res, err := st.Sweep(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					pass += len(res.Events)
				}
				b.StopTimer()
				busy += machineBusy(b) - before
				moved += pass
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(moved), "ns/transition")
			b.ReportMetric(busy.Seconds()*1e6/float64(moved), "busy-µs/transition")
		})
	}
}

// BenchmarkHeartbeatCallers measures heartbeats on the store path, from 4
// callers (the light load of make bench's Citus row set) and from 64, of
// 400 servers of 20 tenants, on plain PostgreSQL and on the test Citus
// cluster (whose tenants spread over both workers). ns/op is wall clock
// per heartbeat with the callers side by side.
func BenchmarkHeartbeatCallers(b *testing.B) {
	for _, e := range benchEngines {
		for _, callers := range []int{4, 64} {
			b.Run(fmt.Sprintf("%s/callers=%d", e.name, callers), func(b *testing.B) {
				ctx := context.Background()
				_, st := e.open(b)
				tenants := make([]uuid.UUID, 20)
				for i := range tenants {
					tenants[i] = uuid.New()
				}
				var targets []benchTarget
				for i := range 400 {
					tenant := tenants[i%len(tenants)]
					srv, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("m%04d", i),
						Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "s"}}}, 0)
					if err != nil {
						b.Fatal(err)
					}
					targets = append(targets, benchTarget{tenant, srv.ServerID})
				}
				// Every server once: the tenants' workers known.
				for _, t := range targets {
					if _, _, err := st.Heartbeat(ctx, t.tenant, t.server); err != nil {
						b.Fatal(err)
					}
				}
				heartbeatFrom(b, st, targets, callers)
			})
		}
	}
}

// BenchmarkHeldBatch measures a flush of held heartbeats as mcpd makes it
// (Store.WriteHeldBatch): every server of 20 tenants once, 50 servers
// each, on plain PostgreSQL and on the test Citus cluster (one statement
// per worker there). Besides ns/op (wall clock of one flush),
// busy-µs/op is the whole machine's busy CPU time per flush, from
// /proc/stat, and busy-µs/heartbeat the same per heartbeat written: run
// a few hundred flushes (-benchtime 300x).
func BenchmarkHeldBatch(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			ctx := context.Background()
			_, st := e.open(b)
			const tenants, servers = 20, 50
			batch := make([]store.TenantHeld, tenants)
			for i := range batch {
				batch[i].Tenant = uuid.New()
				for j := range servers {
					srv, _, _, err := st.Register(ctx, batch[i].Tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("m%04d", j),
						Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "s"}}}, 0)
					if err != nil {
						b.Fatal(err)
					}
					batch[i].Beats = append(batch[i].Beats, store.HeldHeartbeat{ServerID: srv.ServerID, Age: time.Millisecond})
				}
			}
			flush := func() error {
				for _, res := range st.WriteHeldBatch(ctx, batch) {
					if res.Err != nil {
						return res.Err
					}
					for _, o := range res.Outcomes {
						if o.Err != nil {
							return o.Err
						}
					}
				}
				return nil
			}
			if err := flush(); err != nil { // the tenants' workers known
				b.Fatal(err)
			}
			perFlush := measureBusy(b, flush)
			b.ReportMetric(float64(perFlush.Nanoseconds())/1e3/(tenants*servers), "busy-µs/heartbeat")
		})
	}
}
