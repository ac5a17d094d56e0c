package pgstore_test

import (
	"testing"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/storetest"
)

// citusCases are the cases of the store conformance suite that pass on
// Citus so far: registration, deregistration, the audit list, positions
// and cursors, quotas, skills and pages. Not yet: the heartbeat batch and
// the sweep, whose statements span tenants (one statement per tenant and
// a sweep per tenant are still to do; see docs/scaling.md).
var citusCases = []string{
	"latest_position", "remotes_replaced_on_reregister", "servers_page_bytes", "servers_page_bytes_default",
	"quota_concurrent_reregistrations", "quota_counts_deregistered_reregistration",
	"quota_concurrent_registrations", "quota_refuses_new_module", "events_filter_by_module", "find_skills",
	"list_then_watch_has_no_gap", "feed_positions_checked", "concurrent_commits_never_skipped",
	"capability_numbers_at_the_limits", "trace_id_made_by_store", "reregister_removes_skills",
	"deregister_idempotent",
}

// The store conformance suite on a Citus cluster (a coordinator and two
// workers, citus.shard_count 8), through cyberos_app, the tables
// distributed by migrate up. Each case meets again what an unmodified
// mcpd met there (shared/citus/README.md): the triggers and keys that kept
// the tables from being distributed, set_config that never reached the
// workers (row-level security failed closed), now() inside COALESCE, FOR
// UPDATE without tenant_id, and the SECURITY DEFINER function that touched
// a shard the app's role had changed in the same transaction.
func TestCitusConformance(t *testing.T) {
	c := pgtest.SharedCitus(t)
	storetest.RunOnly(t, citusCases, func(t *testing.T) storetest.Harness { return harness(t, c.NewDB(t)) })
}
