package pgstore

import (
	"context"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/registry"
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

// RegisterResult is what Register returns, for RegisterGroup.
type RegisterResult struct {
	Server  registry.Server
	Created bool
	Event   registry.Event
	Err     error
}

// RegisterGroup makes the registrations of infos[i] for tenants[i] (of one
// worker, each tenant once) under quotas[i] as one group of registrations
// that queued together: in one call of mcp_register_group, or, when one
// of them fails it, each alone; on the worker itself as Register would. It
// returns each one's result.
func (s *Store) RegisterGroup(tenants []uuid.UUID, infos []registry.ServerInfo, quotas []int) []RegisterResult {
	reqs := make([]*registerRequest, len(tenants))
	workers, _ := s.tenantWorkers(context.Background(), []batchKey{{tenant: tenants[0]}})
	for i := range tenants {
		reqs[i] = &registerRequest{reg: newRegistration(tenants[i], infos[i], quotas[i]), done: make(chan registerResult, 1)}
		reqs[i].reg.worker = max(workers[tenants[0]], 0)
	}
	group := slices.Clone(reqs)
	sortByTenant(group)
	s.registerGroup(group)
	out := make([]RegisterResult, len(reqs))
	for i, r := range reqs {
		res := <-r.done
		out[i] = RegisterResult{Server: res.srv, Created: res.created, Event: res.ev, Err: res.err}
	}
	return out
}

// ReadsOnWorkers returns how many reads the store made on a Citus worker
// itself (workerreads.go).
func (s *Store) ReadsOnWorkers() int64 { return s.workerReads.made.Load() }

// CallsOnWorkers returns how many calls of delegated functions the store
// made on a Citus worker itself (writeConn).
func (s *Store) CallsOnWorkers() int64 { return s.workerReads.writes.Load() }

// ReadInTenant runs sql, a query of one int4 column, as a read scoped to
// tenant (queryInTenant), for the test that a read that fails leaves its
// session in the pool.
func (s *Store) ReadInTenant(ctx context.Context, tenant uuid.UUID, sql string) error {
	_, err := queryInTenant(ctx, s, tenant, pgx.RowTo[int32], sql)
	return err
}
