package pgstore

import (
	"context"

	"github.com/google/uuid"
)

// RegisterSQL is the registration's one statement, for the test that Citus
// hands it to the worker of the tenant's shard.
const RegisterSQL = registerSQL

// WorkerGroups returns the tenants of each call that a heartbeat batch of
// the pairs (tenants[i], servers[i]) makes on Citus for its healthy
// servers: one call per worker.
func (s *Store) WorkerGroups(ctx context.Context, tenants, servers []uuid.UUID) ([][]uuid.UUID, error) {
	pairs := make([]batchKey, len(tenants))
	for i := range tenants {
		pairs[i] = batchKey{tenants[i], servers[i]}
	}
	groups, err := s.workerGroups(ctx, pairs)
	if err != nil {
		return nil, err
	}
	out := make([][]uuid.UUID, len(groups))
	for i, g := range groups {
		for _, p := range g {
			out[i] = append(out[i], p.tenant)
		}
	}
	return out, nil
}
