package mcpserve_test

import (
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// TestPostgres runs the death-and-recovery case over PostgreSQL (as the
// app role, under row-level security), whose feed the hub polls.
func TestPostgres(t *testing.T) {
	t.Parallel()
	pg := func(t testing.TB, clock clockwork.Clock) testStore {
		st := pgstore.New(pgtest.NewDB(t).App, pgstore.Options{Clock: clock})
		t.Cleanup(st.Close)
		return st
	}
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			notifyDeathAndRecovery(t, setup(t, envOptions{store: pg}), rev)
		})
	}
}
