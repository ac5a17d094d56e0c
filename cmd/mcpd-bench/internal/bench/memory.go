package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"

	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
)

// benchSkills are the skills of every server the harness registers: two,
// as the seeded database has.
var benchSkills = []registry.SkillInfo{{Name: "search"}, {Name: "summarize"}}

// RegisterRequest is the registration of module m (from 1) of a tenant.
func RegisterRequest(m int) api.RegisterRequest {
	return api.RegisterRequest{ModuleName: "module-" + strconv.Itoa(m), Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}, Skills: benchSkills}
}

// HeapResult is the Go heap of a memstore holding Servers servers.
type HeapResult struct {
	Servers int `json:"servers"`
	// HeapInuse is the growth of runtime.MemStats.HeapInuse after a GC,
	// from the empty store to the full one.
	HeapInuse int64 `json:"heap_inuse_bytes"`
	// PerServer is HeapInuse / Servers.
	PerServer float64 `json:"bytes_per_server"`
}

// MemstoreHeap registers tenants x modules servers (two skills each) in a
// memstore of this process and measures the heap they hold.
func MemstoreHeap(ctx context.Context, tenants, modules int) (HeapResult, error) {
	before := heapInuse()
	st := memstore.New(clockwork.NewRealClock())
	for t := 1; t <= tenants; t++ {
		for m := 1; m <= modules; m++ {
			req := RegisterRequest(m)
			_, _, _, err := st.Register(ctx, TenantID(t), registry.ServerInfo{
				ModuleName: req.ModuleName, Version: req.Version, SupportedProtocols: req.SupportedProtocols,
				Skills: req.Skills, TraceID: registry.NewTraceID(),
			}, 0)
			if err != nil {
				return HeapResult{}, fmt.Errorf("memstore register: %w", err)
			}
		}
	}
	after := heapInuse()
	runtime.KeepAlive(st)
	n := tenants * modules
	res := HeapResult{Servers: n, HeapInuse: int64(after) - int64(before)}
	res.PerServer = float64(res.HeapInuse) / float64(n)
	return res, nil
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
