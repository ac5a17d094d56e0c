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
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Registration groups on Citus. A registration is one delegated call
// (mcp_register), and the delegation and the commit of a call cost about
// as much as the registration's own statements (docs/performance.md). So
// registrations that arrive while registerCallsPerWorker calls of their
// tenant's worker are in flight wait for one to end, and then go together,
// at most one of each tenant, in one call of mcp_register_group, made on
// that worker (writeQueryOn): one call and one commit for all.
// A registration that finds its worker with a call to spare goes at once,
// alone: under light load nothing waits. A registration whose trace is
// recorded always goes alone (Register). A registration refused for its
// tenant's quota is refused within the call, which registers the others.
// When the database refuses the call for another reason (a deadlock, a
// registration it cannot take), each of the group is registered again
// alone, so that it gets its own answer; when the worker cannot serve
// (down, read-only, out of time) each gets that error.
//
// A call takes its tenants' locks in tenant order, so two calls do not
// deadlock. Against a heartbeat call of the same worker, which locks the
// rows of several tenants in the order of its shards' tasks, a group that
// registers again a server that is heartbeating can deadlock; PostgreSQL
// breaks it after deadlock_timeout, the heartbeat batch is retried
// (isRetryable) and the group's registrations go alone.

const (
	// registerCallsPerWorker bounds the registration calls in flight to
	// one worker.
	registerCallsPerWorker = 2
	// maxRegisterGroup bounds the registrations of one call.
	maxRegisterGroup = 16
	// maxGroupedSkills is the most skills of a registration that shares a
	// call: a registration's statements grow with its skills, and one
	// with many would hold up the others of its call (a registration of
	// 256 skills took 170 ms alone on the bench's cluster), while what it
	// saves by sharing is the same small part.
	maxGroupedSkills = 16
)

// registerGroupSQL registers a group of tenants of one worker:
// mcp_register_group (migrations/functions), its rows those of
// mcp_register with the registration's index (from 1) last.
const registerGroupSQL = `SELECT * FROM mcp_register_group($1::uuid, $2::uuid[], $3::uuid[], $4::jsonb, $5::integer[], $6::timestamptz)`

// registerRequest is a registration waiting for its worker's call.
type registerRequest struct {
	reg registration
	// deadline is the caller's (zero: none).
	deadline time.Time
	done     chan registerResult // buffered, 1
	// gone is set when the caller stopped waiting before a call took it.
	gone atomic.Bool
}

// registerGroups queues the registrations of each worker (Citus's node
// group) and counts its calls in flight.
type registerGroups struct {
	mu     sync.Mutex
	queued map[int64][]*registerRequest
	busy   map[int64]int
	// closed is set by Store.Close: registrations go alone from then on.
	closed bool
	calls  sync.WaitGroup
}

// close makes registrations go alone and waits for the calls in flight.
func (g *registerGroups) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.calls.Wait()
}

// registerGrouped makes reg in a call of its tenant's worker, alone or
// with the registrations that queued for that worker meanwhile.
func (s *Store) registerGrouped(ctx context.Context, reg registration) registerResult {
	// Where its worker is not known (the read of Citus's metadata
	// failed), a registration goes alone.
	workers, err := s.tenantWorkers(ctx, []batchKey{{tenant: reg.tenant}})
	worker, ok := workers[reg.tenant]
	if err != nil || !ok || worker < 0 || len(reg.skills) > maxGroupedSkills || !reg.validUTF8() {
		return s.registerOne(ctx, reg)
	}
	req := &registerRequest{reg: reg, done: make(chan registerResult, 1)}
	req.reg.worker = worker
	req.deadline, _ = ctx.Deadline()
	g := &s.registerGroups
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return s.registerOne(ctx, reg)
	}
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
		req.gone.Store(true)
		select {
		case res := <-req.done: // answered meanwhile
			return res
		default:
		}
		// A call that took it meanwhile may still commit it, which a
		// retry makes harmless, as for a registration of its own.
		return registerResult{err: translate(ctx.Err())}
	}
}

// validUTF8 reports whether reg's text is UTF-8, as JSON carries it
// unchanged; other text goes alone, to be refused as it would be.
func (reg *registration) validUTF8() bool {
	texts := append([]string{reg.module, reg.version, reg.traceID}, reg.protocols...)
	texts = append(append(texts, reg.skills...), reg.descriptions...)
	for _, p := range []*string{reg.description, reg.title} {
		if p != nil {
			texts = append(texts, *p)
		}
	}
	for _, t := range texts {
		if !utf8.ValidString(t) {
			return false
		}
	}
	return true
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
	ctx, cancel := s.registerContext(group)
	defer cancel()
	if len(group) == 1 {
		group[0].done <- s.registerOne(ctx, group[0].reg)
		return
	}
	results, err := s.registerGroupCall(ctx, group)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		for i, r := range group {
			r.done <- results[i]
		}
	case errors.As(err, &pgErr) && (isRetryable(err) || !unavailableCode(pgErr.Code)):
		// The database refused the call, for one registration or
		// another, or rolled it back for a deadlock or a serialization
		// failure: nothing was written. Each alone, for its own answer,
		// a few at a time, through the coordinator: the worker's own pool
		// carries at most registerCallsPerWorker registration calls.
		eachTenant(len(group), func(i int) {
			r := group[i]
			if r.gone.Load() {
				return
			}
			ctx, cancel := s.registerContext(group[i : i+1])
			defer cancel()
			reg := r.reg
			reg.worker = 0
			r.done <- s.registerOne(ctx, reg)
		})
	default:
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
	}
}

// registerContext is the context of a call of group's registrations: the
// store's batch timeout, or the latest of the callers' deadlines when
// every caller has one and it is sooner.
func (s *Store) registerContext(group []*registerRequest) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(s.batchTimeout)
	var latest time.Time
	for _, r := range group {
		if r.deadline.IsZero() {
			return context.WithDeadline(context.Background(), deadline)
		}
		if r.deadline.After(latest) {
			latest = r.deadline
		}
	}
	if latest.Before(deadline) {
		deadline = latest
	}
	return context.WithDeadline(context.Background(), deadline)
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
		tenants[i], ids[i], quotas[i] = reg.tenant, reg.newID, int32(reg.quota) // newRegistration bounds it
		items[i] = registrationJSON{ModuleName: reg.module, Version: reg.version, Protocols: reg.protocols,
			Capabilities: reg.capabilities, TraceID: reg.traceID, Remotes: reg.remotes,
			Description: reg.description, Title: reg.title, Skills: reg.skills, SkillDescriptions: reg.descriptions}
	}
	body, err := json.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("encode registrations: %w", err)
	}
	rows, err := s.writeQueryOn(ctx, group[0].reg.worker, registerGroupSQL, group[0].reg.tenant, tenants, ids, body, quotas, s.now())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	results := make([]registerResult, len(group))
	seen := make([]bool, len(group))
	for rows.Next() {
		var (
			r       eventRow
			created bool
			index   int32
		)
		if rows.RawValues()[0] == nil {
			// A registration refused for its tenant's quota: a row of its
			// index alone.
			skip := make([]any, len(rows.FieldDescriptions()))
			skip[len(skip)-1] = &index
			if err := rows.Scan(skip...); err != nil {
				return nil, err
			}
			if index < 1 || int(index) > len(group) || seen[index-1] {
				return nil, fmt.Errorf("registration group: a refusal of registration %d of %d", index, len(group))
			}
			results[index-1] = registerResult{err: registry.ErrQuotaExceeded}
			seen[index-1] = true
			continue
		}
		srv, err := scanServer(rows, append(r.appendDest(nil), &created, &index)...)
		if err != nil {
			return nil, err
		}
		ev, _, err := r.event()
		if err != nil {
			return nil, err
		}
		if index < 1 || int(index) > len(group) || seen[index-1] {
			return nil, fmt.Errorf("registration group: a row of registration %d of %d", index, len(group))
		}
		results[index-1] = registerResult{srv: srv, created: created, ev: ev}
		seen[index-1] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if i := slices.Index(seen, false); i >= 0 {
		return nil, fmt.Errorf("registration group: no row of registration %d of %d", i+1, len(group))
	}
	return results, nil
}
