package pgstore_test

import (
	"testing"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/storetest"
)

// The whole store conformance suite on a Citus cluster (a coordinator and
// two workers, citus.shard_count 8), through cyberos_app, the tables
// distributed by migrate up. Its cases meet again what an unmodified mcpd
// met there (shared/citus/README.md): the triggers and keys that kept the
// tables from being distributed; set_config that never reached the
// workers (row-level security failed closed on registration); the
// statement trigger's transition table; generic plans of SQL functions
// with parameters (heartbeat, feed, live counts); now() inside COALESCE;
// FOR UPDATE without tenant_id (sweep, deregistration, registration
// again); the per-tenant feed reads (whose events two transaction-id
// spaces lost); the joins of servers and skills or events off the
// distribution column (catalog, unhealthy servers); and a SECURITY
// DEFINER function touching a shard the app's role changed in the same
// transaction.
func TestCitusConformance(t *testing.T) {
	c := pgtest.SharedCitus(t)
	storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(t, c.NewDB(t)) })
}
