package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

// BenchmarkHeartbeat measures the whole heartbeat path on loopback: client,
// HTTP, token verification, handler, registrar and memstore, with
// concurrent clients (GOMAXPROCS x -cpu goroutines, see b.SetParallelism),
// each heartbeating a server of its own.
func BenchmarkHeartbeat(b *testing.B) {
	c, _ := setup(b)
	ctx := context.Background()
	const servers = 256
	ids := make([]uuid.UUID, servers)
	for i := range ids {
		srv, _, err := c.Register(ctx, registerReq(fmt.Sprintf("bench-%03d", i)), "")
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = srv.ServerID
	}
	var next atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := ids[next.Add(1)%servers]
		for pb.Next() {
			if _, err := c.Heartbeat(ctx, id); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
