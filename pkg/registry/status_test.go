package registry_test

import (
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/registry"
)

func TestParseStatus(t *testing.T) {
	if len(registry.Statuses) != 4 {
		t.Fatalf("Statuses has %d entries, want 4", len(registry.Statuses))
	}
	for _, want := range registry.Statuses {
		got, err := registry.ParseStatus(string(want))
		if err != nil || got != want {
			t.Fatalf("ParseStatus(%q) = %q, %v", want, got, err)
		}
		if got.String() != string(want) {
			t.Fatalf("String() = %q, want %q", got.String(), want)
		}
	}
	for _, s := range []string{"", "Healthy", "HEALTHY", " healthy", "healthy ", "healthy\n", "ok", "down",
		"unknown", "degrade", "deregister", "removed", "healthy,degraded", "*"} {
		if got, err := registry.ParseStatus(s); err == nil {
			t.Fatalf("ParseStatus(%q) = %q, want an error", s, got)
		}
	}
}

func TestClassify(t *testing.T) {
	const i = 10 * time.Second
	cases := []struct {
		lag, interval time.Duration
		misses        int64
		want          registry.Status
	}{
		{-time.Hour, i, 0, registry.StatusHealthy},
		{0, i, 0, registry.StatusHealthy},
		{time.Nanosecond, i, 0, registry.StatusHealthy},
		{i - time.Nanosecond, i, 0, registry.StatusHealthy},
		{i, i, 1, registry.StatusHealthy}, // a single miss is never more than healthy
		{15 * time.Second, i, 1, registry.StatusHealthy},
		{19900 * time.Millisecond, i, 1, registry.StatusHealthy},
		{2*i - time.Nanosecond, i, 1, registry.StatusHealthy},
		{2 * i, i, 2, registry.StatusDegraded},
		{25 * time.Second, i, 2, registry.StatusDegraded},
		{29999 * time.Millisecond, i, 2, registry.StatusDegraded},
		{3*i - time.Nanosecond, i, 2, registry.StatusDegraded},
		{3 * i, i, 3, registry.StatusUnhealthy},
		{35 * time.Second, i, 3, registry.StatusUnhealthy},
		{24 * time.Hour, i, 8640, registry.StatusUnhealthy},
		{2 * time.Second, time.Second, 2, registry.StatusDegraded},
		{3 * time.Second, time.Second, 3, registry.StatusUnhealthy},
		{time.Hour, 0, 0, registry.StatusHealthy},
		{time.Hour, -time.Second, 0, registry.StatusHealthy},
	}
	for _, c := range cases {
		if got := registry.Misses(c.lag, c.interval); got != c.misses {
			t.Errorf("Misses(%s, %s) = %d, want %d", c.lag, c.interval, got, c.misses)
		}
		if got := registry.Classify(c.lag, c.interval); got != c.want {
			t.Errorf("Classify(%s, %s) = %s, want %s", c.lag, c.interval, got, c.want)
		}
	}
	if got := registry.DegradedAfter(i); got != 20*time.Second {
		t.Errorf("DegradedAfter(10s) = %s, want 20s", got)
	}
	if got := registry.UnhealthyAfter(i); got != 30*time.Second {
		t.Errorf("UnhealthyAfter(10s) = %s, want 30s", got)
	}
	if registry.DefaultHeartbeatInterval != 10*time.Second || registry.DefaultMonitorPeriod != 5*time.Second {
		t.Errorf("defaults: interval %s, period %s; the contract says 10s and 5s",
			registry.DefaultHeartbeatInterval, registry.DefaultMonitorPeriod)
	}
}
