package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/limit"
)

// acquireWatch is what the watch handler calls: past the tenant's streams,
// 429 rate-limited with Retry-After, counted as a watches refusal.
func TestAcquireWatch(t *testing.T) {
	t.Parallel()
	h := &handler{limits: limit.New(limit.Options{MaxWatches: 1}), metrics: NewMetrics(MetricsOptions{})}
	tenant := uuid.New()
	r := httptest.NewRequest(http.MethodGet, "/v1/mcp/watch", nil)
	release, ok := h.acquireWatch(httptest.NewRecorder(), r, tenant)
	if !ok {
		t.Fatal("first watch refused")
	}
	rec := httptest.NewRecorder()
	if _, ok := h.acquireWatch(rec, r, tenant); ok {
		t.Fatal("second watch allowed at a limit of 1")
	}
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("refusal: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	release()
	if _, ok := h.acquireWatch(httptest.NewRecorder(), r, tenant); !ok {
		t.Fatal("watch refused after a release")
	}
}
