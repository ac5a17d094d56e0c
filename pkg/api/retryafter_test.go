package api_test

import (
	"net/http"
	"strconv"
	"testing"
)

// TestServiceUnavailableRetryAfterJittered: every 503 carries a Retry-After
// of 1 to 3 seconds, drawn for each answer, so that a fleet that honours it
// does not come back in lockstep (it was always 1).
func TestServiceUnavailableRetryAfterJittered(t *testing.T) {
	t.Parallel()
	b := setup(t) // serves no change feed: the watch is a 503
	seen := map[int]int{}
	for range 200 {
		resp := b.get(t, "/v1/mcp/watch")
		if resp.code != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503: %s", resp.code, resp.body)
		}
		secs, err := strconv.Atoi(resp.header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 3 {
			t.Fatalf("Retry-After %q, want whole seconds from 1 to 3", resp.header.Get("Retry-After"))
		}
		seen[secs]++
	}
	if len(seen) != 3 {
		t.Fatalf("Retry-After of 200 answers: %v, want each of 1, 2 and 3", seen)
	}
}

// retryAfterOneToThree reports whether h is a 503's Retry-After: 1, 2 or 3.
func retryAfterOneToThree(h string) bool {
	return h == "1" || h == "2" || h == "3"
}
