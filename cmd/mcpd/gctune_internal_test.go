package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		// PostgreSQL: at most 400 %.
		{0, 400},
		{4 * mib, 400},   // a few connections: 5x a small heap
		{8 * mib, 400},   // 32 MiB of headroom is 400 %
		{16 * mib, 200},  // 32 MiB of headroom
		{100 * mib, 32},  // 10,000 connections: 32 MiB, not 400 MiB
		{200 * mib, 25},  // a quarter of the live heap
		{1000 * mib, 25}, // never less
	} {
		if got := gcPercentFor(c.live, postgresGCPercent); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live/mib, got, c.want)
		}
	}
	// --dev: at most Go's default; 100,000 servers are about 90 MiB live.
	for _, c := range []struct {
		live uint64
		want int
	}{{0, 100}, {8 * mib, 100}, {32 * mib, 100}, {64 * mib, 50}, {90 * mib, 35}, {400 * mib, 25}} {
		if got := gcPercentFor(c.live, devGCPercent); got != c.want {
			t.Errorf("--dev: gcPercentFor(%d MiB) = %d, want %d", c.live/mib, got, c.want)
		}
	}
}

// The tuner runs after every collection.
func TestGCTunerRunsAfterEachCollection(t *testing.T) {
	startGCTuner(postgresGCPercent)
	debug.SetGCPercent(100) // not the tuner's: the next run sets it back
	for i := range 3 {
		before := gcTunings.Load()
		runtime.GC()
		testwait.Until(t, fmt.Sprintf("the tuner after collection %d", i+1), 5*time.Second, func() bool {
			return gcTunings.Load() != before
		})
	}
	// The test's live heap is small: 400 %.
	if p := debug.SetGCPercent(postgresGCPercent); p != postgresGCPercent {
		t.Fatalf("GC percent %d after the tuner, want %d", p, postgresGCPercent)
	}
}
