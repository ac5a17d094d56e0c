package pgstore

import (
	"context"
	"sync"
	"time"
)

// A sweep on Citus shorter than four times minWorkerShare (2 s, at
// heartbeat intervals below about 4 s) leaves each of its calls its whole
// time (workerShare): a worker that hangs (a frozen host, a partition that
// drops packets) holds its first call to the end, and the sweep fails
// whole, the other workers' tenants unswept. So a sweep that runs out of
// its time leaves a probe of each worker running in the background, a
// read of one tenant's position that waits up to sweepProbeLimit. While a
// worker's probe has gone unanswered for minWorkerShare or longer, the
// next sweeps take the worker as one that did not answer its probe: no
// read of every shard (the last list of tenants is swept), no call for
// its tenants (they fail, as in an outage), and the other workers' tenants
// are swept. The probe's end, with an answer or at its limit, ends it;
// the next sweep that runs out of time probes again.

// sweepProbeLimit bounds a background probe of a worker.
const sweepProbeLimit = time.Minute

// sweepProbes are the background probes of the workers, after a sweep
// that ran out of its time.
type sweepProbes struct {
	mu sync.Mutex
	// since holds the start of each worker's probe in flight.
	since map[int64]time.Time
	// starting is set while a sweep's probes are being started.
	starting bool
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	probes   sync.WaitGroup
}

// init prepares p; Store.New calls it.
func (p *sweepProbes) init() {
	p.ctx, p.cancel = context.WithCancel(context.Background())
}

// close ends the probes in flight and waits for them.
func (p *sweepProbes) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.probes.Wait()
}

// unanswered returns the workers whose probe has been in flight for
// minWorkerShare or longer.
func (p *sweepProbes) unanswered() map[int64]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out map[int64]bool
	for w, since := range p.since {
		if time.Since(since) >= minWorkerShare {
			if out == nil {
				out = make(map[int64]bool)
			}
			out[w] = true
		}
	}
	return out
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
	p.probes.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.probes.Done()
		ctx, cancel := context.WithTimeout(p.ctx, sweepProbeLimit)
		defer cancel()
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
			p.since[w] = time.Now()
			p.probes.Go(func() {
				pctx, cancel := context.WithTimeout(p.ctx, sweepProbeLimit)
				defer cancel()
				var epoch, pos int64
				_ = s.pool.QueryRow(pctx, horizonSQL, tenant).Scan(&epoch, &pos)
				p.mu.Lock()
				delete(p.since, w)
				p.mu.Unlock()
			})
		}
	}()
}
