package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Registration groups on Citus. A registration is one delegated call
// (mcp_register), and the delegation and the commit of a call cost about
// as much as the registration's own statements (docs/performance.md). So
// registrations that arrive while registerCallsPerWorker calls of their
// tenant's worker are in flight wait for one to end, and then go together,
// at most one of each tenant, in one call of mcp_register_group, which
// Citus hands whole to that worker: one delegation and one commit for all.
// A registration that finds its worker with a call to spare goes at once,
// alone: under light load nothing waits. A registration whose trace is
// recorded always goes alone (Register). When one registration of a group
// fails the call (a quota reached), each of the group is registered again
// alone, so that it gets its own answer; when the worker cannot serve
// (down, read-only, out of time) each gets that error.

const (
	// registerCallsPerWorker bounds the registration calls in flight to
	// one worker.
	registerCallsPerWorker = 2
	// maxRegisterGroup bounds the registrations of one call.
	maxRegisterGroup = 16
)

// registerGroupSQL registers a group of tenants of one worker:
// mcp_register_group (migrations/functions), its rows those of
// mcp_register with the registration's index (from 1) last.
const registerGroupSQL = `SELECT * FROM mcp_register_group($1::uuid, $2::uuid[], $3::uuid[], $4::jsonb, $5::integer[], $6::timestamptz)`

// registerRequest is a registration waiting for its worker's call.
type registerRequest struct {
	reg  registration
	done chan registerResult // buffered, 1
	// gone is set when the caller stopped waiting before a call took it.
	gone atomic.Bool
}

// registerGroups queues the registrations of each worker (Citus's node
// group) and counts its calls in flight.
type registerGroups struct {
	mu     sync.Mutex
	queued map[int64][]*registerRequest
	busy   map[int64]int
	calls  sync.WaitGroup
}

// registerGrouped makes reg in a call of its tenant's worker, alone or
// with the registrations that queued for that worker meanwhile.
func (s *Store) registerGrouped(ctx context.Context, reg registration) registerResult {
	workers, err := s.tenantWorkers(ctx, []batchKey{{tenant: reg.tenant}})
	if err != nil {
		return registerResult{err: translate(err)}
	}
	worker, ok := workers[reg.tenant]
	if !ok || worker < 0 {
		return s.registerOne(ctx, reg)
	}
	req := &registerRequest{reg: reg, done: make(chan registerResult, 1)}
	g := &s.registerGroups
	g.mu.Lock()
	if g.queued == nil {
		g.queued, g.busy = make(map[int64][]*registerRequest), make(map[int64]int)
	}
	g.queued[worker] = append(g.queued[worker], req)
	start := g.busy[worker] < registerCallsPerWorker
	if start {
		g.busy[worker]++
		g.calls.Add(1)
	}
	g.mu.Unlock()
	if start {
		go s.registerCalls(worker)
	}
	select {
	case res := <-req.done:
		return res
	case <-ctx.Done():
		// A call that took it meanwhile may still commit it, which a
		// retry makes harmless, as for a registration of its own.
		req.gone.Store(true)
		return registerResult{err: translate(ctx.Err())}
	}
}

// registerCalls makes the calls of worker until nothing is queued for it.
func (s *Store) registerCalls(worker int64) {
	defer s.registerGroups.calls.Done()
	for {
		group := s.registerGroups.take(worker)
		if group == nil {
			return
		}
		s.registerGroup(group)
	}
}

// take removes the next call's registrations from worker's queue and
// returns them: the first of each tenant, at most maxRegisterGroup, in
// tenant order, so that two calls take their tenants' locks in one order.
// With nothing queued it gives the call's slot back and returns nil.
func (g *registerGroups) take(worker int64) []*registerRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	var group, rest []*registerRequest
	for _, r := range g.queued[worker] {
		switch {
		case r.gone.Load():
		case len(group) < maxRegisterGroup && !slices.ContainsFunc(group, func(o *registerRequest) bool {
			return o.reg.tenant == r.reg.tenant
		}):
			group = append(group, r)
		default:
			rest = append(rest, r)
		}
	}
	if len(rest) == 0 {
		delete(g.queued, worker)
	} else {
		g.queued[worker] = rest
	}
	if len(group) == 0 {
		if g.busy[worker]--; g.busy[worker] <= 0 {
			delete(g.busy, worker)
		}
		return nil
	}
	sortByTenant(group)
	return group
}

// sortByTenant sorts a group in the order its call takes the tenants.
func sortByTenant(group []*registerRequest) {
	slices.SortFunc(group, func(a, b *registerRequest) int {
		return bytes.Compare(a.reg.tenant[:], b.reg.tenant[:])
	})
}

// registerGroup makes the registrations of group, of tenants of one
// worker, and answers each.
func (s *Store) registerGroup(group []*registerRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), s.batchTimeout)
	defer cancel()
	if len(group) == 1 {
		group[0].done <- s.registerOne(ctx, group[0].reg)
		return
	}
	results, err := s.registerGroupCall(ctx, group)
	switch {
	case err == nil:
		for i, r := range group {
			r.done <- results[i]
		}
	case errors.Is(translate(err), registry.ErrUnavailable):
		if workerFault(err) {
			keys := make([]batchKey, len(group))
			for i, r := range group {
				keys[i] = batchKey{tenant: r.reg.tenant}
			}
			s.forgetWorkers(keys)
		}
		for _, r := range group {
			r.done <- registerResult{err: translate(err)}
		}
	default:
		// One registration failed them all: each alone, for its own
		// answer.
		eachTenant(len(group), func(i int) { group[i].done <- s.registerOne(ctx, group[i].reg) })
	}
}

// registrationJSON is a registration of mcp_register_group's JSON array.
type registrationJSON struct {
	ModuleName        string          `json:"module_name"`
	Version           string          `json:"version"`
	Protocols         []string        `json:"protocols"`
	Capabilities      json.RawMessage `json:"capabilities,omitempty"`
	TraceID           string          `json:"trace_id"`
	Remotes           json.RawMessage `json:"remotes"`
	Description       *string         `json:"description,omitempty"`
	Title             *string         `json:"title,omitempty"`
	Skills            []string        `json:"skills"`
	SkillDescriptions []string        `json:"skill_descriptions"`
}

// registerGroupCall makes group's registrations in one call and returns
// their results, in group's order.
func (s *Store) registerGroupCall(ctx context.Context, group []*registerRequest) ([]registerResult, error) {
	tenants := make([][16]byte, len(group))
	ids := make([][16]byte, len(group))
	quotas := make([]int32, len(group))
	items := make([]registrationJSON, len(group))
	for i, r := range group {
		reg := &r.reg
		tenants[i], ids[i], quotas[i] = reg.tenant, reg.newID, int32(min(reg.quota, 1<<31-1))
		items[i] = registrationJSON{ModuleName: reg.module, Version: reg.version, Protocols: reg.protocols,
			Capabilities: reg.capabilities, TraceID: reg.traceID, Remotes: reg.remotes,
			Description: reg.description, Title: reg.title, Skills: reg.skills, SkillDescriptions: reg.descriptions}
	}
	body, err := json.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("encode registrations: %w", err)
	}
	rows, err := s.writeQuery(ctx, registerGroupSQL, group[0].reg.tenant, tenants, ids, body, quotas, s.now())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	results := make([]registerResult, len(group))
	got := 0
	for rows.Next() {
		var (
			r       eventRow
			created bool
			index   int32
		)
		srv, err := scanServer(rows, append(r.appendDest(nil), &created, &index)...)
		if err != nil {
			return nil, err
		}
		ev, _, err := r.event()
		if err != nil {
			return nil, err
		}
		if index < 1 || int(index) > len(group) {
			return nil, fmt.Errorf("registration group: row of registration %d of %d", index, len(group))
		}
		results[index-1] = registerResult{srv: srv, created: created, ev: ev}
		got++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if got != len(group) {
		return nil, fmt.Errorf("registration group: %d rows for %d registrations", got, len(group))
	}
	return results, nil
}
