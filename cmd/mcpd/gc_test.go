package main

import (
	"runtime/debug"
	"testing"

	"github.com/cyberos/mcpd/pkg/config"
)

// The GC percent is cmd/mcpd's setting: 400 on PostgreSQL, Go's default with
// --dev (both lowered by the tuner as the live heap grows), left alone when
// GOGC is set.
func TestSetGCPercent(t *testing.T) {
	t.Setenv("GOGC", "")
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	setGCPercent(config.Config{Dev: true})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("--dev: GC percent %d, want 100", got)
	}
	setGCPercent(config.Config{})
	if got := debug.SetGCPercent(100); got != postgresGCPercent {
		t.Fatalf("PostgreSQL: GC percent %d, want %d", got, postgresGCPercent)
	}
	t.Setenv("GOGC", "200")
	setGCPercent(config.Config{})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC set: GC percent %d, want 100 (left alone)", got)
	}
}
