package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// BenchmarkCitusVsPlain measures the same loads on plain PostgreSQL and on
// the test Citus cluster (a coordinator and two workers on this machine):
// registering 2,000 servers of two tenants (serial, through cyberos_app),
// and heartbeats of those servers from 16 concurrent callers.
func BenchmarkCitusVsPlain(b *testing.B) {
	engines := []struct {
		name string
		db   func(b *testing.B) *pgtest.DB
	}{
		{"plain", func(b *testing.B) *pgtest.DB { return pgtest.NewDB(b) }},
		{"citus", func(b *testing.B) *pgtest.DB { return pgtest.SharedCitus(b).NewDB(b) }},
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			ctx := context.Background()
			db := e.db(b)
			st := pgstore.New(db.App, pgstore.Options{})
			b.Cleanup(st.Close)
			tenants := []uuid.UUID{uuid.New(), uuid.New()}
			type target struct{ tenant, server uuid.UUID }
			var targets []target
			start := time.Now()
			for i := range 2000 {
				tenant := tenants[i%2]
				srv, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("m%04d", i),
					Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "s"}}}, 0)
				if err != nil {
					b.Fatal(err)
				}
				targets = append(targets, target{tenant, srv.ServerID})
			}
			registered := time.Since(start)
			b.ResetTimer()
			var (
				wg   sync.WaitGroup
				next = make(chan int)
			)
			for range 16 {
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
			b.StopTimer()
			b.ReportMetric(registered.Seconds(), "register-2000-s")
		})
	}
}
