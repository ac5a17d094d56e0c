package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Garbage collection with PostgreSQL. mcpd keeps no state per server: at
// full heartbeat load over a few connections its live heap is what requests
// in flight hold (under 10 MiB), and collecting at 5x that instead of 2x
// (GC percent 400) saves 10-20 % of its CPU per heartbeat. But every open
// connection holds about 10 KiB of live heap (net/http's read and write
// buffers, 4 KiB each, and the connection's state): a fleet of 10,000
// servers, each on its own keep-alive connection, is some 100 MiB live,
// which GC percent 400 lets grow to 500 MiB. So after each collection the
// percent is set to let the heap grow past the live heap by
// max(gcMinHeadroom, live/4), at most 400 % and at least 25 %
// (docs/performance.md, "Fleet shape"). With --dev the registry is the
// heap: Go's default 100 % until the live heap passes 32 MiB, then the
// same headroom, so that 100,000 servers (about 90 MiB live) do not double
// into 180 MiB of heap.
const (
	gcMinPercent  = 25
	gcMinHeadroom = 32 << 20
)

// gcPercentFor is the GC percent for a live heap of live bytes, at most
// maxPercent.
func gcPercentFor(live uint64, maxPercent int) int {
	if live == 0 {
		return maxPercent
	}
	headroom := max(uint64(gcMinHeadroom), live/4)
	return int(min(max(headroom*100/live, gcMinPercent), uint64(maxPercent)))
}

var (
	gcTunerOnce sync.Once
	// gcTunerMax is the percent of a small live heap (startGCTuner's).
	gcTunerMax atomic.Int64
	// gcTunings counts the tuner's runs (tests).
	gcTunings atomic.Int64
)

// startGCTuner sets the GC percent after every collection from then on,
// for the whole process, at most maxPercent (the last call's).
func startGCTuner(maxPercent int) {
	gcTunerMax.Store(int64(maxPercent))
	debug.SetGCPercent(maxPercent)
	gcTunerOnce.Do(func() {
		runtime.SetFinalizer(&gcSentinel{}, tuneGC)
	})
}

// gcSentinel is garbage as soon as it is made: its finalizer runs after
// each collection and arms itself again.
type gcSentinel struct{ _ [64]byte }

var gcLiveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

func tuneGC(s *gcSentinel) {
	metrics.Read(gcLiveSample)
	if gcLiveSample[0].Value.Kind() == metrics.KindUint64 {
		debug.SetGCPercent(gcPercentFor(gcLiveSample[0].Value.Uint64(), int(gcTunerMax.Load())))
	}
	gcTunings.Add(1)
	runtime.SetFinalizer(s, tuneGC)
}
