package backoff_test

import (
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/backoff"
)

// TestExponential: doubling from lo, capped at hi, the cap kept however
// many failures follow, and a lo above hi held to hi.
func TestExponential(t *testing.T) {
	t.Parallel()
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := backoff.Exponential(time.Second, 30*time.Second, i+1); got != w {
			t.Errorf("Exponential attempt %d = %s, want %s", i+1, got, w)
		}
	}
	if got := backoff.Exponential(time.Second, 30*time.Second, 1000); got != 30*time.Second {
		t.Errorf("Exponential attempt 1000 = %s, want 30s", got)
	}
	if got := backoff.Exponential(time.Second, 30*time.Second, 0); got != time.Second {
		t.Errorf("Exponential attempt 0 = %s, want 1s", got)
	}
	if got := backoff.Exponential(time.Minute, 30*time.Second, 1); got != 30*time.Second {
		t.Errorf("Exponential with lo above hi = %s, want 30s", got)
	}
}
