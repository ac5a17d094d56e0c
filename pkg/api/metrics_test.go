package api_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/api"
)

func TestSweepFailuresCounted(t *testing.T) {
	t.Parallel()
	m := api.NewMetrics(api.MetricsOptions{})
	m.ObserveSweep(time.Millisecond, nil, nil)
	m.ObserveSweep(2*time.Millisecond, nil, errors.New("sweep: connection refused"))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	text := rec.Body.String()
	for _, want := range []string{
		"mcpd_sweep_duration_seconds_count 2",
		"mcpd_sweep_failures_total 1",
		"mcpd_store_errors_total 1",
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}
