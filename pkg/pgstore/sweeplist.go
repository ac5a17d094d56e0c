package pgstore

import (
	"context"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The sweep's list of tenants is also saved on the coordinator
// (mcp_sweep_tenant_list, migration 0033), whenever a read of every shard
// finds it changed: a replica that starts while a worker is down cannot
// read one, and swept nothing (nor delivered an alert, alertworkers.go)
// until the worker returned. It sweeps the saved list instead, as a
// replica that read one sweeps its own: the tenants registered since it
// was saved wait for the worker.

// saveSweepTenants saves tenants, a list read now, on the coordinator when
// it is not the list this store saved last; a failure is left to the next
// read.
func (s *Store) saveSweepTenants(ctx context.Context, tenants []uuid.UUID) {
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
// sweep's last list when the store has none.
func (s *Store) loadSavedSweepTenants(ctx context.Context) {
	s.engineMu.Lock()
	known := s.sweptTenants != nil
	s.engineMu.Unlock()
	if known {
		return
	}
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
		saved = []uuid.UUID{}
	}
	s.engineMu.Lock()
	if s.sweptTenants == nil {
		s.sweptTenants = saved
	}
	s.engineMu.Unlock()
}
