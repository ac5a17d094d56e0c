package main

import (
	"testing"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// mcpd pointed at a Citus coordinator (two workers, the tables distributed
// by migrate up) passes what it passes on PostgreSQL: the lifecycle over
// HTTP (register, heartbeat, degraded, unhealthy, recovery, deregister)...
func TestCitusLifecycleOverHTTP(t *testing.T) {
	lifecycleOverHTTP(t, pgtest.SharedCitus(t).NewDB(t))
}

// ...and two replicas writing and sweeping at once while a watcher moves
// from one to the other and a client pages the audit list: every event of
// the tenant exactly once, in commit order, nothing of another tenant.
func TestCitusWatchExactlyOnceAcrossReplicas(t *testing.T) {
	watchExactlyOnceAcrossReplicas(t, pgtest.SharedCitus(t).NewDB(t))
}
