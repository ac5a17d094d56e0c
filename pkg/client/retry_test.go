package client_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/client"
)

// TestRetryWait: a Retry-After is honoured and spread upwards, a backoff
// spread either way, and a limit caps both, spread below it.
func TestRetryWait(t *testing.T) {
	t.Parallel()
	unavailable := &apiwire.Problem{Status: http.StatusServiceUnavailable, RetryAfter: 2 * time.Second}
	for _, c := range []struct {
		name    string
		err     error
		backoff time.Duration
		limit   time.Duration
		lo, hi  time.Duration
	}{
		{"retry-after over the backoff", unavailable, time.Second, 0, 2 * time.Second, 2400 * time.Millisecond},
		{"backoff over the retry-after", unavailable, 4 * time.Second, 0, 3200 * time.Millisecond, 4800 * time.Millisecond},
		{"no problem", errors.New("reset"), time.Second, 0, 800 * time.Millisecond, 1200 * time.Millisecond},
		{"capped by the interval", unavailable, 30 * time.Second, 10 * time.Second, 8 * time.Second, 10 * time.Second},
		{"retry-after past the interval", &apiwire.Problem{Status: 503, RetryAfter: time.Minute}, time.Second, 10 * time.Second,
			8 * time.Second, 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 100 {
				d := client.RetryWait(c.err, c.backoff, 0.2, c.limit, nil)
				if d < c.lo || d > c.hi {
					t.Fatalf("wait %s, want %s to %s", d, c.lo, c.hi)
				}
				seen[d] = true
			}
			if len(seen) < 50 {
				t.Fatalf("100 waits took %d values: not spread", len(seen))
			}
		})
	}
	if d := client.RetryWait(unavailable, time.Second, 0, 0, nil); d != 2*time.Second {
		t.Fatalf("no spread: %s, want the Retry-After 2s", d)
	}
}
