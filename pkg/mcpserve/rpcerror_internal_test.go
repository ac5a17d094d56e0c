package mcpserve

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A 503 of /mcp carries the contract's Retry-After (1 to 3 s), as every
// 503 of mcpd does; other errors carry none.
func TestRPCErrorRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   bool
	}{{http.StatusServiceUnavailable, true}, {http.StatusBadRequest, false}} {
		rec := httptest.NewRecorder()
		writeRPCError(rec, tc.status, nil, "x")
		got := rec.Header().Get("Retry-After")
		if ok := got == "1" || got == "2" || got == "3"; ok != tc.want || !tc.want && got != "" {
			t.Fatalf("status %d: Retry-After %q; want one: %v", tc.status, got, tc.want)
		}
	}
}
