package lifecycle_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
)

// memFeedAll is a change feed that follows every tenant already: every
// heartbeat of a server the Registrar learnt healthy is held.
type memFeedAll struct{}

func (memFeedAll) Keep(uuid.UUID) bool { return true }

func (memFeedAll) Current(context.Context, uuid.UUID) (bool, error) { return true, nil }

// BenchmarkHeldMemory measures what a held heartbeat costs in memory (the
// bound on unwritten heartbeats, issue 31 item 5): 100,000 known healthy
// servers, spread over a number of tenants, each heartbeat once more and
// held; the figure is the live heap the held set adds, per heartbeat,
// after a garbage collection, and the time to hold one. Each iteration
// flushes the set (to memstore) and holds it again.
func BenchmarkHeldMemory(b *testing.B) {
	const servers = 100_000
	for _, tenants := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			ctx := context.Background()
			r := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{
				Store: memstore.New(clockwork.NewRealClock()), FlushInterval: time.Second,
				Feed: memFeedAll{}, MaxHeld: servers,
			})
			if !r.Holding() {
				b.Fatal("the Registrar does not hold heartbeats")
			}
			type server struct{ tenant, id uuid.UUID }
			ids := make([]uuid.UUID, tenants)
			for i := range ids {
				ids[i] = uuid.New()
			}
			all := make([]server, servers)
			for i := range all {
				tenant := ids[i%tenants]
				srv, _, err := r.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("m-%06d", i),
					Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}})
				if err != nil {
					b.Fatal(err)
				}
				// The first heartbeat goes to the store, which the Registrar
				// learns the server from.
				if _, err := r.Heartbeat(ctx, tenant, srv.ServerID); err != nil {
					b.Fatal(err)
				}
				all[i] = server{tenant, srv.ServerID}
			}
			var perBeat, perHold float64
			var ms runtime.MemStats
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.HeapAlloc
				start := time.Now()
				for _, s := range all {
					if _, err := r.Heartbeat(ctx, s.tenant, s.id); err != nil {
						b.Fatal(err)
					}
				}
				took := time.Since(start)
				runtime.GC()
				runtime.ReadMemStats(&ms)
				perBeat = float64(int64(ms.HeapAlloc)-int64(before)) / servers
				perHold = float64(took.Nanoseconds()) / servers
				if err := r.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			// What is held is written by the flush: the store has each
			// server's heartbeat, so none of them went to the store one by
			// one (which would not have held it).
			if perBeat < 16 {
				b.Fatalf("%.1f bytes per held heartbeat: the heartbeats were not held", perBeat)
			}
			b.ReportMetric(perBeat, "B/held-heartbeat")
			b.ReportMetric(perHold, "ns/held-heartbeat")
			b.ReportMetric(0, "ns/op")
		})
	}
}
