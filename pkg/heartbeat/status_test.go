package heartbeat_test

import (
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

func TestParseStatus(t *testing.T) {
	if len(heartbeat.Statuses) != 4 {
		t.Fatalf("Statuses has %d entries, want 4", len(heartbeat.Statuses))
	}
	for _, want := range heartbeat.Statuses {
		got, err := heartbeat.ParseStatus(string(want))
		if err != nil || got != want {
			t.Fatalf("ParseStatus(%q) = %q, %v", want, got, err)
		}
		if got.String() != string(want) {
			t.Fatalf("String() = %q, want %q", got.String(), want)
		}
	}
	for _, s := range []string{"", "Healthy", "HEALTHY", " healthy", "healthy ", "healthy\n", "ok", "down",
		"unknown", "degrade", "deregister", "removed", "healthy,degraded", "*"} {
		if got, err := heartbeat.ParseStatus(s); err == nil {
			t.Fatalf("ParseStatus(%q) = %q, want an error", s, got)
		}
	}
}

func TestClassify(t *testing.T) {
	const i = 10 * time.Second
	cases := []struct {
		lag, interval time.Duration
		misses        int64
		want          heartbeat.Status
	}{
		{-time.Hour, i, 0, heartbeat.StatusHealthy},
		{0, i, 0, heartbeat.StatusHealthy},
		{time.Nanosecond, i, 0, heartbeat.StatusHealthy},
		{i - time.Nanosecond, i, 0, heartbeat.StatusHealthy},
		{i, i, 1, heartbeat.StatusHealthy}, // a single miss is never more than healthy
		{15 * time.Second, i, 1, heartbeat.StatusHealthy},
		{19900 * time.Millisecond, i, 1, heartbeat.StatusHealthy},
		{2*i - time.Nanosecond, i, 1, heartbeat.StatusHealthy},
		{2 * i, i, 2, heartbeat.StatusDegraded},
		{25 * time.Second, i, 2, heartbeat.StatusDegraded},
		{29999 * time.Millisecond, i, 2, heartbeat.StatusDegraded},
		{3*i - time.Nanosecond, i, 2, heartbeat.StatusDegraded},
		{3 * i, i, 3, heartbeat.StatusUnhealthy},
		{35 * time.Second, i, 3, heartbeat.StatusUnhealthy},
		{24 * time.Hour, i, 8640, heartbeat.StatusUnhealthy},
		{2 * time.Second, time.Second, 2, heartbeat.StatusDegraded},
		{3 * time.Second, time.Second, 3, heartbeat.StatusUnhealthy},
		{time.Hour, 0, 0, heartbeat.StatusHealthy},
		{time.Hour, -time.Second, 0, heartbeat.StatusHealthy},
	}
	for _, c := range cases {
		if got := heartbeat.Misses(c.lag, c.interval); got != c.misses {
			t.Errorf("Misses(%s, %s) = %d, want %d", c.lag, c.interval, got, c.misses)
		}
		if got := heartbeat.Classify(c.lag, c.interval); got != c.want {
			t.Errorf("Classify(%s, %s) = %s, want %s", c.lag, c.interval, got, c.want)
		}
	}
	if got := heartbeat.DegradedAfter(i); got != 20*time.Second {
		t.Errorf("DegradedAfter(10s) = %s, want 20s", got)
	}
	if got := heartbeat.UnhealthyAfter(i); got != 30*time.Second {
		t.Errorf("UnhealthyAfter(10s) = %s, want 30s", got)
	}
	if heartbeat.DefaultHeartbeatInterval != 10*time.Second || heartbeat.DefaultMonitorPeriod != 5*time.Second {
		t.Errorf("defaults: interval %s, period %s; the contract says 10s and 5s",
			heartbeat.DefaultHeartbeatInterval, heartbeat.DefaultMonitorPeriod)
	}
}
