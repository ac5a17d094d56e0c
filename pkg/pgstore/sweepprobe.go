package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A sweep on Citus shorter than four times minWorkerShare (2 s, at
// heartbeat intervals below about 4 s) leaves each of its calls its whole
// time (workerShare): a worker that hangs (a frozen host, a partition that
// drops packets) holds its first call to the end, and the sweep fails
// whole, the other workers' tenants unswept. So a sweep that runs out of
// its time leaves a probe of each worker of the last list of tenants
// running in the background: a read of one tenant's position, asked again
// after an error (which is the coordinator's, not the worker's answer),
// up to sweepProbeLimit. While a worker's probe has had a connection for
// minWorkerShare or longer without an answer, the next sweeps take the
// worker as one that did not answer its probe: no read of every shard
// (the last list of tenants is swept), no call for its tenants (they
// fail, as in an outage), and the other workers' tenants are swept; the
// heartbeat path's calls to it end and fail at once too (stall.go). A
// call of the heartbeat path that has run the stall time starts these
// probes as well. An answer ends it; so does the limit, after which the
// next sweep that runs out of time probes again. A worker with no tenant
// in the list has no probe: a sweep waits at most half its time for the
// read of every shard, which then goes on alone (readSweepTenants), and
// sweeps the last list.

// sweepProbeLimit bounds a background probe of a worker.
const sweepProbeLimit = 10 * time.Minute

// sweepProbes are the background probes of the workers, after a sweep
// that ran out of its time.
type sweepProbes struct {
	mu sync.Mutex
	// since holds each worker with a probe in flight: when the probe
	// first had a connection of the pool (zero: not yet), so that a wait
	// for a connection does not count as the worker's.
	since map[int64]time.Time
	// starting is set while a sweep's probes are being started.
	starting bool
	// list is the read of the tenants to sweep in flight.
	list *sweepListRead
	// background runs the probes and the reads; mu guards it.
	background
}

// close ends the probes in flight and waits for them.
func (p *sweepProbes) close() { p.stop(&p.mu) }

// hungWorkers returns the workers a sweep takes as not answering: those
// whose probe has had a connection for minWorkerShare or longer without
// an answer, and those the heartbeat path found silent (stall.go).
func (s *Store) hungWorkers() map[int64]bool {
	out := make(map[int64]bool)
	p := &s.sweepProbes
	p.mu.Lock()
	for w, since := range p.since {
		if !since.IsZero() && time.Since(since) >= minWorkerShare {
			out[w] = true
		}
	}
	p.mu.Unlock()
	c := &s.workerCalls
	c.mu.Lock()
	for g, w := range c.workers {
		if w.stalled() {
			out[g] = true
		}
	}
	c.mu.Unlock()
	return out
}

// probeConnected records that worker's probe has a connection, unless it
// had one before, and makes the worker hung (workerCalls.setHung) if the
// probe is still unanswered half the stall time later (minWorkerShare at
// least: longer than the sweeps wait to skip the worker, as a worker
// found hung fails its tenants' heartbeats) and no call to the worker
// succeeded in between; else it looks again as long later, while the
// probe lasts. A worker that is slow on a loaded machine answers some
// call meanwhile.
func (s *Store) probeConnected(worker int64) {
	p := &s.sweepProbes
	p.mu.Lock()
	defer p.mu.Unlock()
	since, ok := p.since[worker]
	if !ok || !since.IsZero() {
		return
	}
	since = time.Now()
	p.since[worker] = since
	wait := max(minWorkerShare, s.workerCalls.stall/2)
	var check func(from time.Time)
	check = func(from time.Time) {
		time.AfterFunc(wait, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if !p.since[worker].Equal(since) || p.closed {
				return
			}
			if s.workerCalls.succeededSince(worker, from) {
				check(time.Now())
				return
			}
			s.workerCalls.setHung(worker, true)
		})
	}
	check(since)
}

// probeWorkersInBackground starts a probe of each worker of the last list
// of tenants the sweep read that has none in flight, unless a sweep is
// starting them already.
func (s *Store) probeWorkersInBackground() {
	p := &s.sweepProbes
	p.mu.Lock()
	if p.starting || p.closed {
		p.mu.Unlock()
		return
	}
	p.starting = true
	p.run(func(ctx context.Context) {
		s.engineMu.Lock()
		tenants := s.sweptTenants
		s.engineMu.Unlock()
		workers, _ := s.tenantWorkers(ctx, tenantKeys(tenants))
		p.mu.Lock()
		defer p.mu.Unlock()
		p.starting = false
		for _, tenant := range tenants {
			w, ok := workers[tenant]
			if _, probing := p.since[w]; !ok || w < 0 || probing || p.closed {
				continue
			}
			if p.since == nil {
				p.since = make(map[int64]time.Time)
			}
			p.since[w] = time.Time{}
			p.run(func(ctx context.Context) { s.probeWorker(ctx, w, tenant) })
		}
	})
	p.mu.Unlock()
}

// probeWorkerInBackground starts a probe of worker, a read of tenant's
// position, unless one is in flight: a call of the heartbeat path that has
// run the stall time asks so.
func (s *Store) probeWorkerInBackground(worker int64, tenant uuid.UUID) {
	p := &s.sweepProbes
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, probing := p.since[worker]; probing || worker < 0 || tenant == uuid.Nil || p.closed {
		return
	}
	if p.since == nil {
		p.since = make(map[int64]time.Time)
	}
	p.since[worker] = time.Time{}
	p.run(func(ctx context.Context) { s.probeWorker(ctx, worker, tenant) })
}

// run runs f in the background, on a context that ends at close or after
// sweepProbeLimit; p.mu is held, and p is not closed.
func (p *sweepProbes) run(f func(ctx context.Context)) {
	p.background.run(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, sweepProbeLimit)
		defer cancel()
		f(ctx)
	})
}

// probeWorker reads tenant's position, on worker, until a read answers
// or ctx ends, and then ends the worker's probe. An error is not an
// answer of the worker's (the coordinator may have given up connecting to
// it): the read is made again after minWorkerShare.
func (s *Store) probeWorker(ctx context.Context, worker int64, tenant uuid.UUID) {
	p := &s.sweepProbes
	defer func() {
		p.mu.Lock()
		delete(p.since, worker)
		s.workerCalls.setHung(worker, false)
		p.mu.Unlock()
	}()
	read := func() error {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		s.probeConnected(worker)
		var epoch, pos int64
		return c.QueryRow(ctx, horizonSQL, tenant).Scan(&epoch, &pos)
	}
	for read() != nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(minWorkerShare):
		}
	}
}

// sweepListRead is the sweep's read of every shard for the tenants to
// sweep (mcp_sweep_tenants), at most one in flight.
type sweepListRead struct {
	started time.Time
	done    chan struct{}
	tenants []uuid.UUID
	err     error
}

// readSweepTenants reads the tenants that have live servers, waiting for
// the read, when a last list is known, half the time left of ctx at most
// (a worker that hangs with no tenant of the last list has no probe to
// find it, and a sweep too short for workerShare would wait for it to the
// end). A read that outlasts the wait goes on in the background, up to
// sweepProbeLimit, and the sweeps meanwhile start none: a sweep that
// comes within minWorkerShare of its start (concurrent sweepers), or
// knows no list, waits for it as the first does; a later one gets
// context.DeadlineExceeded at once and sweeps the last list. Its answer,
// when it comes, is the last list.
func (s *Store) readSweepTenants(ctx context.Context) ([]uuid.UUID, error) {
	// With no list to fall back on, the read is waited for as long as
	// the sweep lasts.
	s.engineMu.Lock()
	fallback := s.sweptTenants != nil
	s.engineMu.Unlock()
	p := &s.sweepProbes
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, context.DeadlineExceeded
	}
	if r := p.list; r != nil {
		p.mu.Unlock()
		if fallback && time.Since(r.started) >= minWorkerShare {
			return nil, context.DeadlineExceeded
		}
		return awaitSweepList(ctx, r, fallback)
	}
	r := &sweepListRead{started: time.Now(), done: make(chan struct{})}
	p.list = r
	p.run(func(rctx context.Context) {
		_, r.err = s.onWorkerConn(rctx, false, func(sctx context.Context, c *pgxpool.Conn) error {
			rows, err := c.Query(sctx, `SELECT tenant_id FROM mcp_sweep_tenants()`)
			if err == nil {
				r.tenants, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			}
			return err
		})
		if r.err == nil {
			s.engineMu.Lock()
			s.sweptTenants = r.tenants
			s.engineMu.Unlock()
		}
		p.mu.Lock()
		p.list = nil
		p.mu.Unlock()
		close(r.done)
		if r.err == nil {
			// After the sweep that waits has the list.
			s.saveSweepTenants(rctx, r.tenants)
		}
	})
	p.mu.Unlock()
	return awaitSweepList(ctx, r, fallback)
}

// awaitSweepList waits for r, when half is set half the time left of ctx
// at most.
func awaitSweepList(ctx context.Context, r *sweepListRead, half bool) ([]uuid.UUID, error) {
	var wait <-chan time.Time
	if deadline, ok := ctx.Deadline(); ok && half {
		timer := time.NewTimer(time.Until(deadline) / 2)
		defer timer.Stop()
		wait = timer.C
	}
	select {
	case <-r.done:
		return r.tenants, r.err
	case <-wait:
		return nil, context.DeadlineExceeded
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
