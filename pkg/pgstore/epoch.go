package pgstore

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// The feed's epoch on Citus. A position names an event of a tenant's trail
// as long as the history that holds it goes on; its epoch says which
// history. On plain PostgreSQL that is the server's WAL timeline
// (mcp_feed_epoch), which a promotion moves on, so that a position handed
// out before a failover answers 410 after it (the same number may name
// another event now). On Citus a tenant's positions live on its worker, and
// a worker fails over on its own: promoted from an asynchronous standby
// that had not received a tenant's last events, it hands their positions
// out again. So on Citus the epoch is the cluster's: the coordinator's
// timeline plus, for each worker group, how far its timeline has moved
// past the first (timeline - 1). A promotion anywhere moves it on, and
// every position of every tenant answers 410 once, as after a failover of
// plain PostgreSQL; a cluster whose workers never failed over keeps the
// coordinator's timeline, the epoch before. A worker added or removed moves
// it by that worker's count.
//
// Every position mcpd hands out on Citus carries the cluster's epoch as
// read before the read that made it (readEpoch): a failover between the two
// labels positions of the new history with the old epoch, which the next
// read's change of epoch expires, never the reverse. The coordinator's
// timeline is read at most clusterEpochTTL before; the workers' in the
// background, once the last read is that old, each worker's on its own
// (on the worker's own pool when the store has one, else through the
// coordinator, master_run_on_worker), each try bounded by
// workerTimelineTimeout; the first read, which the first positions wait
// for, by firstTimelinesTimeout. A worker that cannot be read, or whose
// calls stall, keeps the timeline last read of it (the first timeline
// when none was), so that a worker down or hung changes no epoch; a
// worker that mcpd starts beside while it hangs, and that had failed over
// before, moves the epoch once it is read (one more 410). After a
// worker's failover the epoch moves on within about clusterEpochTTL of
// reads. The worker replaced must be stopped (fenced) before the
// coordinator is given the new address, as Citus itself needs.

// clusterEpochTTL is how long a read of the coordinator's epoch, and of the
// workers' timelines, labels the positions read.
const clusterEpochTTL = time.Second

// workerTimelineTimeout bounds each read of a worker's timeline (on its
// own pool, through the coordinator) and of the workers' list.
const workerTimelineTimeout = time.Second

// firstTimelinesTimeout bounds the first read of the workers' timelines,
// which the first read of positions waits for.
const firstTimelinesTimeout = 500 * time.Millisecond

// workerTimelineSQL reads, through the coordinator, the WAL timeline of
// the worker at $1:$2 (mcp_feed_epoch there).
const workerTimelineSQL = `SELECT success, result FROM master_run_on_worker(ARRAY[$1::text], ARRAY[$2::integer],
	ARRAY['SELECT mcp_feed_epoch()'], false)`

// epochState is the store's last read of the cluster's epoch on Citus.
type epochState struct {
	mu sync.Mutex
	// coordinator is the coordinator's timeline as read at coordinatorAt.
	coordinator   int64
	coordinatorAt time.Time
	// timelines are the workers' timelines by group, as last read of
	// each; timelinesAt is when they were last read, reading is set while
	// a read is under way.
	timelines   map[int64]int64
	timelinesAt time.Time
	reading     bool
	// read is closed once the first read of the timelines is done.
	read chan struct{}
}

// epoch is the cluster's epoch of the coordinator's timeline and the
// workers' as known; e.mu is held.
func (e *epochState) epoch() uint64 {
	epoch := e.coordinator
	for _, tl := range e.timelines {
		epoch += max(tl-1, 0)
	}
	return uint64(epoch)
}

// readEpoch returns the epoch that positions read from now on carry on
// Citus (the cluster's: see above), read at most clusterEpochTTL ago; it
// starts the read of the workers' timelines in the background when the
// last one is that old.
func (s *Store) readEpoch(ctx context.Context) (uint64, error) {
	e := &s.epochState
	e.mu.Lock()
	coordinator, at := e.coordinator, e.coordinatorAt
	if e.read == nil {
		e.read = make(chan struct{})
	}
	read := e.read
	first := e.timelinesAt.IsZero() && !e.reading
	waitFirst := e.timelinesAt.IsZero() && e.reading
	again := !e.timelinesAt.IsZero() && time.Since(e.timelinesAt) >= clusterEpochTTL && !e.reading
	if first || again {
		e.reading = true
	}
	e.mu.Unlock()
	switch {
	case first:
		// The workers' timelines, read now for the first epoch, for a
		// short time at most: a worker that hangs when mcpd starts holds
		// up no read for long, and its timeline counts once read.
		fctx, cancel := context.WithTimeout(ctx, firstTimelinesTimeout)
		s.readWorkerTimelines(fctx)
		cancel()
	case again:
		w := &s.workerReads
		w.mu.Lock()
		closed := w.closed
		if !closed {
			w.run(s.readWorkerTimelines)
		}
		w.mu.Unlock()
		if closed {
			e.mu.Lock()
			e.reading = false
			e.mu.Unlock()
		}
	case waitFirst:
		// Another caller's first read of the timelines is under way.
		select {
		case <-read:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if at.IsZero() || time.Since(at) >= clusterEpochTTL {
		if err := s.pool.QueryRow(ctx, `SELECT mcp_feed_epoch()`).Scan(&coordinator); err != nil {
			return 0, err
		}
		at = time.Now()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if at.After(e.coordinatorAt) {
		e.coordinator, e.coordinatorAt = coordinator, at
	}
	return e.epoch(), nil
}

// citusEpoch is readEpoch on Citus, and 0 on plain PostgreSQL, where the
// read's own epoch (mcp_feed_epoch) stands.
func (s *Store) citusEpoch(ctx context.Context) (uint64, error) {
	if citus, err := s.onCitus(ctx); err != nil || !citus {
		return 0, nil
	}
	epoch, err := s.readEpoch(ctx)
	if err != nil {
		return 0, translate(err)
	}
	return epoch, nil
}

// readWorkerTimelines reads each primary worker's timeline and keeps those
// read, each worker's on its own (a worker that hangs holds up only its
// own): on the worker's own pool when the store has one, else, or when
// that read fails, through the coordinator at the address it lists; a
// worker whose calls stall (stall.go) is not read. A group the coordinator
// no longer lists is forgotten.
func (s *Store) readWorkerTimelines(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, workerTimelineTimeout)
	nodes, err := s.primaryWorkers(lctx)
	cancel()
	read := make(map[int64]int64)
	var mu sync.Mutex
	if err == nil {
		var wg sync.WaitGroup
		for _, n := range nodes {
			if s.workerCalls.stalled(n.group) {
				continue
			}
			wg.Go(func() {
				if tl, ok := s.workerTimeline(ctx, n); ok {
					mu.Lock()
					read[n.group] = tl
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	e := &s.epochState
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timelines == nil {
		e.timelines = make(map[int64]int64)
	}
	if err == nil {
		listed := make(map[int64]bool, len(nodes))
		for _, n := range nodes {
			listed[n.group] = true
		}
		for g := range e.timelines {
			if !listed[g] {
				delete(e.timelines, g)
			}
		}
	}
	for g, tl := range read {
		e.timelines[g] = tl
	}
	if e.timelinesAt.IsZero() {
		close(e.read) // made by readEpoch, which starts every read
	}
	e.timelinesAt, e.reading = time.Now(), false
}

// workerTimeline reads worker n's timeline (mcp_feed_epoch there), each
// try within workerTimelineTimeout: on its own pool, else through the
// coordinator (master_run_on_worker, at the address it lists), which
// bounds the statement itself (queryRowBoundedByServer).
func (s *Store) workerTimeline(ctx context.Context, n workerNode) (int64, bool) {
	var tl int64
	if pool := s.workerPool(n.group); pool != nil {
		pctx, cancel := context.WithTimeout(ctx, workerTimelineTimeout)
		err := pool.QueryRow(pctx, `SELECT mcp_feed_epoch()`).Scan(&tl)
		cancel()
		if err == nil {
			return tl, true
		}
	}
	// Bounded by the coordinator: a read every second that its context
	// cut short would cost a coordinator session each time, as long as
	// the worker is slow to answer (after its return, while every
	// session reconnects to it).
	var (
		ok     bool
		result string
	)
	if err := queryRowBoundedByServer(ctx, s.pool, workerTimelineTimeout, workerTimelineSQL, []any{n.host, int32(n.port)}, &ok, &result); err != nil || !ok {
		return 0, false
	}
	tl, err := strconv.ParseInt(result, 10, 64)
	return tl, err == nil
}

// workerNode is a primary worker's group and address, as the coordinator
// lists it.
type workerNode struct {
	group int64
	host  string
	port  int
}

// primaryWorkers lists the primary workers (workerNodesSQL).
func (s *Store) primaryWorkers(ctx context.Context) ([]workerNode, error) {
	rows, err := s.pool.Query(ctx, workerNodesSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var nodes []workerNode
	for rows.Next() {
		var n workerNode
		if err := rows.Scan(&n.group, &n.host, &n.port); err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return nodes, rows.Err()
}
