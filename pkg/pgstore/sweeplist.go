package pgstore

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The sweep's list of tenants is also saved on the coordinator
// (mcp_sweep_tenant_list, migration 0033), whenever a read of every shard
// finds it changed: a replica that starts while a worker is down cannot
// read one, and swept nothing (nor delivered an alert, alertworkers.go)
// until the worker returned. Such a replica loads the saved list before
// its first read, and sweeps it when the read fails or hangs, as a
// replica that read one sweeps its own: the tenants registered since it
// was saved wait for the worker. A save that lands after another
// replica's newer one leaves the older list until the next change.

// sweepListTimeout bounds a save or a load of the saved list: a statement
// of the coordinator alone.
const sweepListTimeout = 2 * time.Second

// saveSweepTenants saves tenants, a list read now, on the coordinator when
// it is not the list this store saved last; a failure is left to the next
// read. One store's saves go one at a time (saveMu), and the function
// orders those of several replicas.
func (s *Store) saveSweepTenants(ctx context.Context, tenants []uuid.UUID) {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, sweepListTimeout)
	defer cancel()
	s.engineMu.Lock()
	same := s.savedTenants != nil && slices.Equal(s.savedTenants, tenants)
	s.engineMu.Unlock()
	if same {
		return
	}
	if _, err := s.pool.Exec(ctx, `SELECT mcp_sweep_tenants_save($1)`, tenants); err != nil {
		s.logger.DebugContext(ctx, "save the sweep's list of tenants", "err", err)
		return
	}
	s.engineMu.Lock()
	s.savedTenants = slices.Clip(tenants)
	s.engineMu.Unlock()
}

// loadSavedSweepTenants makes the list saved on the coordinator the
// sweep's last list when the store has none: read before the store's own
// read of every shard, which may fail or hang, so that the sweep has a
// list to fall back on (sweepTenants).
func (s *Store) loadSavedSweepTenants(ctx context.Context) {
	s.engineMu.Lock()
	known := s.sweptTenants != nil
	s.engineMu.Unlock()
	if known {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sweepListTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT tenant_id FROM mcp_sweep_tenants_saved()`)
	var saved []uuid.UUID
	if err == nil {
		saved, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	}
	if err != nil {
		s.logger.DebugContext(ctx, "read the saved list of tenants", "err", err)
		return
	}
	if saved == nil {
		saved = []uuid.UUID{} // a list, if empty
	}
	s.engineMu.Lock()
	if s.sweptTenants == nil {
		s.sweptTenants = saved
	}
	s.engineMu.Unlock()
}
