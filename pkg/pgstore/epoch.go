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
// background, once the last read is that old, on the worker's own pool when
// the store has one, else through the coordinator (run_command_on_workers),
// each bounded by workerTimelineTimeout (the first read, which the first
// positions wait for, by firstTimelinesTimeout): a worker that cannot be
// read keeps the timeline last read of it (the first timeline when none
// was), so that a worker down or hung changes no epoch. After a worker's
// failover the epoch moves on within about clusterEpochTTL of reads.

// clusterEpochTTL is how long a read of the coordinator's epoch, and of the
// workers' timelines, labels the positions read.
const clusterEpochTTL = time.Second

// workerTimelineTimeout bounds the background read of the workers'
// timelines.
const workerTimelineTimeout = 2 * time.Second

// firstTimelinesTimeout bounds the first read of the workers' timelines,
// which the first read of positions waits for.
const firstTimelinesTimeout = 500 * time.Millisecond

// workerTimelinesSQL reads, through the coordinator, the WAL timeline of
// each primary worker (mcp_feed_epoch on the worker), by group.
const workerTimelinesSQL = `SELECT n.groupid, r.result FROM run_command_on_workers('SELECT mcp_feed_epoch()') r
	JOIN pg_dist_node n ON n.nodename = r.nodename AND n.nodeport = r.nodeport
	WHERE r.success AND n.noderole = 'primary' AND n.isactive AND n.groupid <> 0`

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

// readWorkerTimelines reads each primary worker's timeline and keeps those
// read: on the worker's own pool when the store has one, else, for the
// rest, through the coordinator.
func (s *Store) readWorkerTimelines(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, workerTimelineTimeout)
	defer cancel()
	read := make(map[int64]int64)
	groups, err := s.workerGroupList(ctx)
	if err == nil {
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		for _, g := range groups {
			pool := s.workerPool(g)
			if pool == nil {
				continue
			}
			wg.Go(func() {
				var tl int64
				if err := pool.QueryRow(ctx, `SELECT mcp_feed_epoch()`).Scan(&tl); err == nil {
					mu.Lock()
					read[g] = tl
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	// The groups not read on a pool of their own (none yet, or one that
	// failed: a worker replaced at another address), through the
	// coordinator, at the addresses it lists.
	if err != nil || len(read) < len(groups) {
		if rows, qerr := s.pool.Query(ctx, workerTimelinesSQL); qerr == nil {
			for rows.Next() {
				var (
					g      int64
					result string
				)
				if rows.Scan(&g, &result) != nil {
					continue
				}
				if _, ok := read[g]; ok {
					continue
				}
				if tl, perr := strconv.ParseInt(result, 10, 64); perr == nil {
					read[g] = tl
				}
			}
			rows.Close()
		}
	}
	e := &s.epochState
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timelines == nil {
		e.timelines = make(map[int64]int64)
	}
	for g, tl := range read {
		e.timelines[g] = tl
	}
	if e.timelinesAt.IsZero() {
		if e.read == nil {
			e.read = make(chan struct{})
		}
		close(e.read)
	}
	e.timelinesAt, e.reading = time.Now(), false
}

// workerGroupList lists the groups of the primary workers.
func (s *Store) workerGroupList(ctx context.Context) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT groupid FROM pg_dist_node WHERE noderole = 'primary' AND isactive AND groupid <> 0`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var groups []int64
	for rows.Next() {
		var g int64
		if err := rows.Scan(&g); err != nil {
			return nil, err
		}
		groups = append(groups, g)
	}
	return groups, rows.Err()
}
