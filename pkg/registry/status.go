package registry

import (
	"fmt"
	"time"
)

// Status is the health of a registered server: a closed set of four values.
type Status string

// The four statuses a server can have.
const (
	StatusHealthy      Status = "healthy"
	StatusDegraded     Status = "degraded"
	StatusUnhealthy    Status = "unhealthy"
	StatusDeregistered Status = "deregistered"
)

// Statuses lists every status, in the order people read them.
var Statuses = []Status{StatusHealthy, StatusDegraded, StatusUnhealthy, StatusDeregistered}

// ParseStatus returns the status named s, or an error for anything else.
func ParseStatus(s string) (Status, error) {
	switch st := Status(s); st {
	case StatusHealthy, StatusDegraded, StatusUnhealthy, StatusDeregistered:
		return st, nil
	}
	return "", fmt.Errorf("unknown status %q: want one of healthy, degraded, unhealthy, deregistered", s)
}

// String returns the status as the API spells it.
func (s Status) String() string { return string(s) }

// Misses after which the monitor moves a live server away from healthy.
const (
	MissesDegraded  = 2
	MissesUnhealthy = 3
)

// DefaultHeartbeatInterval is how often a server is expected to heartbeat.
const DefaultHeartbeatInterval = 10 * time.Second

// DefaultMonitorPeriod is how often the monitor sweeps.
const DefaultMonitorPeriod = 5 * time.Second

// Misses is the number of whole heartbeat intervals in lag.
func Misses(lag, interval time.Duration) int64 {
	if lag <= 0 || interval <= 0 {
		return 0
	}
	return int64(lag / interval)
}

// Classify is the status a live server has after lag without a heartbeat:
// 0 or 1 miss healthy, 2 degraded, 3 or more unhealthy.
func Classify(lag, interval time.Duration) Status {
	switch m := Misses(lag, interval); {
	case m >= MissesUnhealthy:
		return StatusUnhealthy
	case m >= MissesDegraded:
		return StatusDegraded
	default:
		return StatusHealthy
	}
}

// DegradedAfter is the lag at which a healthy server becomes degraded.
func DegradedAfter(interval time.Duration) time.Duration { return MissesDegraded * interval }

// UnhealthyAfter is the lag at which a live server becomes unhealthy.
func UnhealthyAfter(interval time.Duration) time.Duration { return MissesUnhealthy * interval }
