package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A held heartbeat waits for a read of its tenant's position (Horizon).
// Through the coordinator that read is planned there, then sent to the
// worker that holds the tenant's shard: on the test cluster 352-415 µs a
// read, against 90 µs on plain PostgreSQL. Citus (11 and later) keeps its
// metadata on every worker, so the same statement run on the tenant's own
// worker is planned and executed there, locally: 114-126 µs
// (docs/scaling.md). So on Citus the store reads positions on the
// tenant's worker, over a small pool per worker with the settings of its
// own pool (user, password, TLS, database, timeouts), at the address the
// coordinator lists in pg_dist_node; `--database-url` still names the
// coordinator alone.
//
// A read there sees what a read through the coordinator sees: a write
// commits on the shard's worker before it is answered; its positions
// carry the cluster's epoch (epoch.go). A connection to a
// worker first proves that it reached that worker's group, a primary
// (pg_dist_local_group, pg_is_in_recovery), or it is dropped. A worker
// that mcpd cannot reach that way (a network where only the coordinator
// reaches the workers, a pg_hba.conf that admits the coordinator alone)
// is read through the coordinator, as before, and tried again after
// workerReadRetry; a read that gets no connection in time is made
// through the coordinator at once.

// workerReadRetry is how long a worker that could not be reached directly
// is read through the coordinator before it is tried again.
const workerReadRetry = 30 * time.Second

// workerReadOpenTimeout bounds the first connection to a worker, and the
// read of the workers' addresses.
const workerReadOpenTimeout = 5 * time.Second

// workerConnectTimeout bounds each connection to a worker: a worker that
// does not answer one (a host that hangs, a route that drops packets) is
// read through the coordinator after it.
const workerConnectTimeout = 2 * time.Second

// workerNodesSQL lists the primary workers' groups and addresses.
const workerNodesSQL = `SELECT groupid, nodename, nodeport FROM pg_dist_node
	WHERE noderole = 'primary' AND isactive AND groupid <> 0`

// workerReads are the store's pools to the Citus workers, by group.
type workerReads struct {
	// off: every read goes through the coordinator (Options).
	off bool

	mu sync.Mutex
	// nodes holds each worker's address and pool; readAt is when they were
	// read (zero: never), reading is set while a read is under way.
	nodes   map[int64]*workerReadNode
	readAt  time.Time
	reading bool
	// made counts the reads made on a worker, writes the calls of
	// delegated functions (writeConn).
	made, writes atomic.Int64
	// background reads the addresses and opens the pools; mu guards it.
	background
}

// workerReadNode is one worker's address and, once a connection proved
// it, its pool.
type workerReadNode struct {
	host string
	port uint16
	pool *pgxpool.Pool
	// opening is set while its first connection is tried; failedAt is
	// when the last try failed.
	opening  bool
	failedAt time.Time
}

// init prepares w; Store.New calls it.
func (w *workerReads) init(off bool) {
	w.off = off
	w.nodes = make(map[int64]*workerReadNode)
	w.background.init()
}

// close ends the background work and closes the pools.
func (w *workerReads) close() {
	w.stop(&w.mu)
	var pools []*pgxpool.Pool
	w.mu.Lock()
	for _, n := range w.nodes {
		if n.pool != nil {
			pools = append(pools, n.pool)
			n.pool = nil
		}
	}
	w.mu.Unlock()
	closePools(pools)
}

// workerPool returns the pool of worker's direct reads and calls, or nil
// when the worker is reached through the coordinator for now; it starts in the
// background what is missing (the workers' addresses, a pool) and never
// waits for the database.
func (s *Store) workerPool(worker int64) *pgxpool.Pool {
	pool, _, _ := s.workerPoolAt(worker)
	return pool
}

// workerPoolAt is workerPool, with the address the pool connects to.
func (s *Store) workerPoolAt(worker int64) (pool *pgxpool.Pool, host string, port uint16) {
	w := &s.workerReads
	if w.off || worker <= 0 {
		return nil, "", 0
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, "", 0
	}
	if (w.readAt.IsZero() || now.Sub(w.readAt) >= placementTTL) && !w.reading {
		w.reading = true
		w.run(s.readWorkerNodes)
	}
	n := w.nodes[worker]
	if n == nil {
		return nil, "", 0
	}
	if n.pool == nil && !n.opening && (n.failedAt.IsZero() || now.Sub(n.failedAt) >= workerReadRetry) {
		n.opening = true
		w.run(func(ctx context.Context) { s.openWorkerPool(ctx, worker, n) })
	}
	return n.pool, n.host, n.port
}

// readWorkerNodes reads the workers' addresses from the coordinator; a
// worker whose address changed loses its pool.
func (s *Store) readWorkerNodes(ctx context.Context) {
	w := &s.workerReads
	ctx, cancel := context.WithTimeout(ctx, workerReadOpenTimeout)
	defer cancel()
	read := make(map[int64]workerReadNode)
	nodes, err := s.primaryWorkers(ctx)
	for _, n := range nodes {
		read[n.group] = workerReadNode{host: n.host, port: uint16(n.port)}
	}
	var moved []*pgxpool.Pool
	defer func() { closePools(moved) }()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reading = false
	if err != nil {
		s.logger.Debug("citus worker reads: the workers' addresses are unread", "error", err)
		return
	}
	w.readAt = time.Now()
	for group, n := range w.nodes {
		if a, ok := read[group]; ok && a.host == n.host && a.port == n.port {
			continue
		}
		if n.pool != nil {
			moved = append(moved, n.pool)
		}
		delete(w.nodes, group)
	}
	for group, a := range read {
		if w.nodes[group] == nil {
			w.nodes[group] = &workerReadNode{host: a.host, port: a.port}
		}
	}
}

// closePools closes pools; a pool's Close waits for its connections in
// use, so it is never called with workerReads.mu held.
func closePools(pools []*pgxpool.Pool) {
	for _, p := range pools {
		p.Close()
	}
}

// openWorkerPool opens n's pool for worker and keeps it once a
// connection proved the worker; or marks n failed.
func (s *Store) openWorkerPool(ctx context.Context, worker int64, n *workerReadNode) {
	w := &s.workerReads
	pool, err := s.newWorkerPool(ctx, worker, n.host, n.port)
	var unused []*pgxpool.Pool
	defer func() { closePools(unused) }()
	w.mu.Lock()
	defer w.mu.Unlock()
	n.opening = false
	if err != nil || w.closed || w.nodes[worker] != n {
		if pool != nil {
			unused = append(unused, pool)
		}
		if err != nil {
			n.failedAt = time.Now()
			s.logger.Info("citus worker reads: the worker is read through the coordinator",
				"group", worker, "address", n.host+":"+strconv.Itoa(int(n.port)), "error", err)
		}
		return
	}
	n.pool, n.failedAt = pool, time.Time{}
}

// newWorkerPool returns a pool to the worker of group at host:port, with
// the store's pool's settings, once one connection proved it.
func (s *Store) newWorkerPool(ctx context.Context, group int64, host string, port uint16) (*pgxpool.Pool, error) {
	cfg := s.pool.Config() // a deep copy, TLS configurations included
	// The counted calls (stall.go), and the registration calls, which
	// are not counted: a registration never holds up a flush.
	cfg.MaxConns, cfg.MinConns = maxWorkerCalls+registerCallsPerWorker, 0
	if t := cfg.ConnConfig.ConnectTimeout; t <= 0 || t > workerConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = workerConnectTimeout
	}
	// The ping of a connection idle for a second, before it is handed
	// out: a worker that hangs does not hold its caller up longer than a
	// new connection would.
	cfg.PingTimeout = workerConnectTimeout
	retarget := func(c *pgconn.FallbackConfig) {
		c.Host, c.Port = host, port
		if c.TLSConfig != nil && c.TLSConfig.ServerName != "" {
			c.TLSConfig.ServerName = host
		}
	}
	primary := pgconn.FallbackConfig{Host: cfg.ConnConfig.Host, Port: cfg.ConnConfig.Port, TLSConfig: cfg.ConnConfig.TLSConfig}
	retarget(&primary)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.TLSConfig = primary.Host, primary.Port, primary.TLSConfig
	fallbacks := make([]*pgconn.FallbackConfig, 0, len(cfg.ConnConfig.Fallbacks))
	for _, f := range cfg.ConnConfig.Fallbacks {
		c := *f
		retarget(&c)
		fallbacks = append(fallbacks, &c)
	}
	cfg.ConnConfig.Fallbacks = fallbacks
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		// Bounded as a new connection is: one the pool opens in the
		// background has no deadline of its own, and a worker that
		// hangs after it accepted the connection would hold it forever
		// (the session settings of after are a statement too).
		pctx, cancel := context.WithTimeout(ctx, workerConnectTimeout)
		defer cancel()
		if after != nil {
			if err := after(pctx, conn); err != nil {
				return err
			}
		}
		return proveWorker(pctx, conn, group)
	}
	ctx, cancel := context.WithTimeout(ctx, workerReadOpenTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// errNotTheWorker is a connection that reached another node than the
// worker it was opened for.
var errNotTheWorker = errors.New("not the worker's primary")

// proveWorker fails unless conn reached the primary of the worker group.
func proveWorker(ctx context.Context, conn *pgx.Conn, group int64) error {
	var (
		local    int64
		recovery bool
	)
	if err := conn.QueryRow(ctx, `SELECT (SELECT groupid FROM pg_dist_local_group), pg_is_in_recovery()`).Scan(&local, &recovery); err != nil {
		return err
	}
	if local != group || recovery {
		return fmt.Errorf("%w: group %d, in recovery %t, want group %d", errNotTheWorker, local, recovery, group)
	}
	return nil
}

// querier is what a read needs of a pool or of one of its connections.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// readOnWorker runs read, a read of worker's tenants, on a connection of
// worker's own pool when the store has one (workerPool), else through the
// coordinator; also when no connection of that pool could be had in time
// (the worker not reachable so, or no longer proved: unreachable). What
// the read itself returns, on either, is the worker's answer; its
// positions carry the cluster's epoch, which the caller reads before it
// (readEpoch). read is told which of the two db is (onWorker).
func (s *Store) readOnWorker(ctx context.Context, worker int64, read func(db querier, onWorker bool) error) error {
	if direct := s.workerPool(worker); direct != nil {
		conn, err := direct.Acquire(ctx)
		if err == nil {
			defer conn.Release()
			s.workerReads.made.Add(1)
			return read(conn, true)
		}
		s.unreachable(worker, direct, err)
	}
	return read(s.pool, false)
}

// closeDropped closes pool, which its worker's node no longer holds, in
// the background (its Close waits for the connections in use); w.mu is
// held.
func (w *workerReads) closeDropped(pool *pgxpool.Pool) {
	if w.closed {
		go pool.Close() // close has collected the pools already
		return
	}
	w.run(func(context.Context) { pool.Close() })
}

// unlisted drops pool, worker's, whose address the coordinator no longer
// lists as the primary of worker's group (writeConn), and has the
// workers' addresses read again at the next call.
func (s *Store) unlisted(worker int64, pool *pgxpool.Pool) {
	w := &s.workerReads
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.nodes[worker]; n != nil && n.pool == pool {
		delete(w.nodes, worker)
		w.readAt = time.Time{}
		w.closeDropped(pool)
		s.logger.Info("citus worker calls: the coordinator no longer lists the worker's address; reading the addresses again",
			"group", worker, "address", n.host+":"+strconv.Itoa(int(n.port)))
	}
}

// unreachable drops pool, worker's, that gave no connection (err): the
// worker is reached through the coordinator until workerReadRetry passes.
func (s *Store) unreachable(worker int64, pool *pgxpool.Pool, err error) {
	w := &s.workerReads
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.nodes[worker]; n != nil && n.pool == pool {
		n.pool, n.failedAt = nil, time.Now()
		w.closeDropped(pool)
		s.logger.Info("citus worker reads: the worker is reached through the coordinator",
			"group", worker, "address", n.host+":"+strconv.Itoa(int(n.port)), "error", err)
	}
}
