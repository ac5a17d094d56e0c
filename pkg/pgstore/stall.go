package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/pkg/registry"
)

// A Citus worker that hangs (a frozen host, a partition that drops
// packets) answers no statement and no cancel: every call routed to it
// waits for its caller's deadline. The heartbeat path keeps the other
// workers' tenants apart from it (docs/scaling.md, "A worker that hangs"):
//
//   - Callers that serve several workers at once (a heartbeat batch, a
//     held flush, a read of positions or of the feed) make a call per
//     worker, side by side, and wait for each at most the stall time
//     (awaitWorkers): a call still running then answers its own share when
//     it returns, and the others' shares are answered already.
//   - Those calls are counted in flight per worker, at most
//     maxWorkerCalls at once (the others wait for a slot, within their
//     deadline), so that calls to a worker that hangs hold a bounded share
//     of the pool.
//   - A call that ran the stall time or longer and ended without any
//     answer from the database (not even the error of its cancel) makes
//     its worker silent: while a call to a silent worker is in flight,
//     every other call of its tenants fails at once with ErrWorkerStalled
//     (503), so one call at a time goes on asking, and the first answer
//     (a result or any error the database sent) ends the silence.
//   - Calls through the coordinator get its answer to their cancel even
//     when the worker behind it hangs, so they never make it silent: a
//     counted call that has run the stall time starts a probe of its
//     worker (sweepprobe.go), and once the probe has gone unanswered for
//     half the stall time, with no counted call to the worker answered
//     meanwhile, the worker is hung: its calls in flight end at once with
//     ErrWorkerStalled, and every call of its tenants fails at once until
//     the probe ends (an answer, or sweepProbeLimit). Before, the
//     held flushes waited the stall time for it at every window, holding
//     up the monitor's sweeps of every tenant, and the tenant's
//     heartbeats waited for their whole deadline (a black-box run,
//     2026-12-07).
//
// A worker that is merely slow (a loaded machine) answers, if late, and
// the cancel of a call past its deadline comes back as an error: it is
// never silent; and while its probe waits some call of it succeeds, so
// that it is not found hung either.

// DefaultWorkerStall is how long a caller that serves several Citus
// workers waits for one worker's call before it answers the others, and
// how long a call must have run, unanswered, to make its worker silent.
const DefaultWorkerStall = 2 * time.Second

// maxWorkerCalls bounds the counted calls in flight to one worker: a
// batch per flusher, a read of positions, a held flush.
const maxWorkerCalls = DefaultFlushers + 2

// ErrWorkerStalled answers a call for a tenant whose Citus worker is
// silent or hung; it is a registry.ErrUnavailable.
var ErrWorkerStalled = fmt.Errorf("%w: the tenant's Citus worker is not answering", registry.ErrUnavailable)

// workerCalls counts the calls in flight to each Citus worker.
type workerCalls struct {
	stall time.Duration
	// onStall, when set, is called once for each counted call that has
	// run the stall time, while it runs, with the call's worker and one
	// of the tenants it serves.
	onStall func(worker int64, tenant uuid.UUID)

	mu      sync.Mutex
	workers map[int64]*workerInFlight
}

// workerInFlight is what workerCalls knows of one worker.
type workerInFlight struct {
	// slots holds a token per call in flight.
	slots chan struct{}
	// inFlight counts the calls in flight; silent: the last call that
	// ended ran the stall time or longer and got no answer.
	inFlight int
	silent   bool
	// hung: the worker's probe has gone unanswered, and no call
	// succeeded meanwhile (setHung); lastOK is when a call last succeeded.
	hung   bool
	lastOK time.Time
	// calls ends each call in flight, with ErrWorkerStalled as its
	// cause, once the worker is hung.
	calls map[*context.CancelCauseFunc]struct{}
}

// stalled reports whether calls to w fail at once.
func (w *workerInFlight) stalled() bool { return w.hung || (w.silent && w.inFlight > 0) }

// worker returns what c knows of worker; c.mu is held.
func (c *workerCalls) worker(worker int64) *workerInFlight {
	if c.workers == nil {
		c.workers = make(map[int64]*workerInFlight)
	}
	w := c.workers[worker]
	if w == nil {
		w = &workerInFlight{slots: make(chan struct{}, maxWorkerCalls)}
		c.workers[worker] = w
	}
	return w
}

// enter counts a call to worker in flight, once a slot is free, and
// returns the context the call runs on (ended with ErrWorkerStalled as its
// cause when the worker is found hung meanwhile) and the function that
// ends it with the call's error, which it returns (ErrWorkerStalled for a
// call ended so); or ErrWorkerStalled when the worker is silent or hung,
// or ctx's error. A negative worker (not known) is not counted.
func (c *workerCalls) enter(ctx context.Context, worker int64, tenant uuid.UUID) (callCtx context.Context, leave func(err error) error, err error) {
	if worker < 0 {
		return ctx, func(err error) error { return err }, nil
	}
	c.mu.Lock()
	w := c.worker(worker)
	stalled := w.stalled()
	c.mu.Unlock()
	if stalled {
		return nil, nil, ErrWorkerStalled
	}
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, translate(ctx.Err())
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	if w.stalled() {
		c.mu.Unlock()
		<-w.slots
		cancel(nil)
		return nil, nil, ErrWorkerStalled
	}
	w.inFlight++
	if w.calls == nil {
		w.calls = make(map[*context.CancelCauseFunc]struct{})
	}
	w.calls[&cancel] = struct{}{}
	c.mu.Unlock()
	var stallTimer *time.Timer
	if c.onStall != nil {
		stallTimer = time.AfterFunc(c.stall, func() { c.onStall(worker, tenant) })
	}
	began := time.Now()
	return callCtx, func(err error) error {
		ran := time.Since(began)
		if stallTimer != nil {
			stallTimer.Stop()
		}
		endedHung := ctx.Err() == nil && errors.Is(context.Cause(callCtx), ErrWorkerStalled)
		var pgErr *pgconn.PgError
		c.mu.Lock()
		w.inFlight--
		delete(w.calls, &cancel)
		switch {
		case endedHung:
		case err == nil || errors.As(err, &pgErr):
			w.silent = false
			if err == nil {
				w.lastOK = time.Now()
			}
		case ran >= c.stall && !errors.Is(err, context.Canceled):
			w.silent = true
		}
		c.mu.Unlock()
		cancel(nil)
		<-w.slots
		if endedHung && err != nil {
			return ErrWorkerStalled
		}
		return err
	}, nil
}

// firstOf returns the first of tenants, uuid.Nil when there is none.
func firstOf(tenants []uuid.UUID) uuid.UUID {
	if len(tenants) == 0 {
		return uuid.Nil
	}
	return tenants[0]
}

// succeededSince reports whether a call to worker succeeded at or after
// since.
func (c *workerCalls) succeededSince(worker int64, since time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.workers[worker]
	return w != nil && !w.lastOK.Before(since)
}

// setHung records whether worker's probe has gone unanswered
// (sweepprobe.go); a worker found hung ends its calls in flight with
// ErrWorkerStalled.
func (c *workerCalls) setHung(worker int64, hung bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.worker(worker)
	if w.hung == hung {
		return
	}
	w.hung = hung
	if hung {
		for cancel := range w.calls {
			(*cancel)(ErrWorkerStalled)
		}
	}
}

// stalled reports whether calls to worker fail at once now.
func (c *workerCalls) stalled(worker int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.workers[worker]
	return w != nil && w.stalled()
}

// anyStalled reports whether the calls to some worker fail at once now.
func (c *workerCalls) anyStalled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.workers {
		if w.stalled() {
			return true
		}
	}
	return false
}

// onWorker runs call as a call to worker (enter) for tenant (one of the
// worker's tenants it serves), on the context enter gives it, unless the
// worker is silent or hung.
func (c *workerCalls) onWorker(ctx context.Context, worker int64, tenant uuid.UUID, call func(ctx context.Context) error) error {
	callCtx, leave, err := c.enter(ctx, worker, tenant)
	if err != nil {
		return err
	}
	return leave(call(callCtx))
}

// tenantWorker returns the worker of tenant on Citus (-1 when it cannot be
// read from the metadata).
func (s *Store) tenantWorker(ctx context.Context, tenant uuid.UUID) int64 {
	workers, err := s.tenantWorkers(ctx, []batchKey{{tenant: tenant}})
	if err != nil {
		return -1
	}
	if w, ok := workers[tenant]; ok {
		return w
	}
	return -1
}

// awaitWorkers runs call(wctx, g) for every g below n (one per worker),
// side by side, and returns the results of those that returned before the
// stall time passed, or before ctx ended (done[g]). The others go on in
// the background: wctx keeps ctx's deadline but not its cancellation, and
// ends when every call has returned.
func awaitWorkers[T any](ctx context.Context, stall time.Duration, n int, call func(wctx context.Context, g int) T) (results []T, done []bool) {
	var (
		wctx   context.Context
		cancel context.CancelFunc
	)
	if deadline, ok := ctx.Deadline(); ok {
		wctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), deadline)
	} else {
		wctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	type result struct {
		g int
		v T
	}
	returned := make(chan result, n)
	var calls sync.WaitGroup
	for g := range n {
		calls.Go(func() { returned <- result{g, call(wctx, g)} })
	}
	go func() {
		calls.Wait()
		cancel()
	}()
	results, done = make([]T, n), make([]bool, n)
	timer := time.NewTimer(stall)
	defer timer.Stop()
	for range n {
		select {
		case r := <-returned:
			results[r.g], done[r.g] = r.v, true
		case <-timer.C:
			return results, done
		case <-ctx.Done():
			return results, done
		}
	}
	return results, done
}

// onCitusFor reports whether the store is on Citus, for a call of
// tenant's own: on Citus it fails with tenantStalled's error when the
// tenant's worker is silent.
func (s *Store) onCitusFor(ctx context.Context, tenant uuid.UUID) (bool, error) {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return false, translate(err)
	}
	if citus {
		if err := s.tenantStalled(ctx, tenant); err != nil {
			return false, err
		}
	}
	return citus, nil
}

// tenantStalled returns ErrWorkerStalled when tenant's worker is silent:
// a call of the tenant's own (an API read, a registration, a
// deregistration) then fails at once instead of holding a connection of
// the pool until its caller gives up. Such calls are not counted in
// flight: a long read does not stall its worker for the others.
func (s *Store) tenantStalled(ctx context.Context, tenant uuid.UUID) error {
	if !s.workerCalls.anyStalled() {
		return nil
	}
	if s.workerCalls.stalled(s.tenantWorker(ctx, tenant)) {
		return ErrWorkerStalled
	}
	return nil
}
