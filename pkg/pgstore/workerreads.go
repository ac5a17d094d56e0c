package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
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
// commits on the shard's worker before it is answered. A connection to a
// worker first proves that it reached that worker's group, a primary
// (pg_dist_local_group, pg_is_in_recovery), or it is dropped. A worker
// that mcpd cannot reach that way (a network where only the coordinator
// reaches the workers, a pg_hba.conf that admits the coordinator alone)
// is read through the coordinator, as before, and tried again after
// workerReadRetry; a read that fails to connect is made again through the
// coordinator at once.

// workerReadRetry is how long a worker that could not be reached directly
// is read through the coordinator before it is tried again.
const workerReadRetry = 30 * time.Second

// workerReadOpenTimeout bounds the first connection to a worker.
const workerReadOpenTimeout = 5 * time.Second

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
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	tasks   sync.WaitGroup
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
	w.ctx, w.cancel = context.WithCancel(context.Background())
}

// close ends the background work and closes the pools.
func (w *workerReads) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cancel()
	w.tasks.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.nodes {
		if n.pool != nil {
			n.pool.Close()
			n.pool = nil
		}
	}
}

// run runs f in the background; w.mu is held and w is not closed.
func (w *workerReads) run(f func(ctx context.Context)) {
	w.tasks.Go(func() { f(w.ctx) })
}

// readPool returns the pool of worker's direct reads, or nil when the
// worker is read through the coordinator for now; it starts in the
// background what is missing (the workers' addresses, a pool) and never
// waits for the database.
func (s *Store) readPool(worker int64) *pgxpool.Pool {
	w := &s.workerReads
	if w.off || worker <= 0 {
		return nil
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if (w.readAt.IsZero() || now.Sub(w.readAt) >= placementTTL) && !w.reading {
		w.reading = true
		w.run(s.readWorkerNodes)
	}
	n := w.nodes[worker]
	if n == nil {
		return nil
	}
	if n.pool == nil && !n.opening && (n.failedAt.IsZero() || now.Sub(n.failedAt) >= workerReadRetry) {
		n.opening = true
		w.run(func(ctx context.Context) { s.openWorkerPool(ctx, worker, n) })
	}
	return n.pool
}

// readWorkerNodes reads the workers' addresses from the coordinator; a
// worker whose address changed loses its pool.
func (s *Store) readWorkerNodes(ctx context.Context) {
	w := &s.workerReads
	ctx, cancel := context.WithTimeout(ctx, workerReadOpenTimeout)
	defer cancel()
	read := make(map[int64]workerReadNode)
	rows, err := s.pool.Query(ctx, workerNodesSQL)
	if err == nil {
		for rows.Next() {
			var (
				group int64
				host  string
				port  int64
			)
			if err = rows.Scan(&group, &host, &port); err != nil {
				break
			}
			read[group] = workerReadNode{host: host, port: uint16(port)}
		}
		rows.Close()
		err = cmpErr(err, rows.Err())
	}
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
			n.pool.Close()
		}
		delete(w.nodes, group)
	}
	for group, a := range read {
		if w.nodes[group] == nil {
			w.nodes[group] = &workerReadNode{host: a.host, port: a.port}
		}
	}
}

// cmpErr returns the first of errs that is not nil.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// openWorkerPool opens n's pool for worker and keeps it once a
// connection proved the worker; or marks n failed.
func (s *Store) openWorkerPool(ctx context.Context, worker int64, n *workerReadNode) {
	w := &s.workerReads
	pool, err := s.newWorkerPool(ctx, worker, n.host, n.port)
	w.mu.Lock()
	defer w.mu.Unlock()
	n.opening = false
	if err != nil || w.closed || w.nodes[worker] != n {
		if pool != nil {
			pool.Close()
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
	cfg := s.pool.Config()
	cfg.MaxConns, cfg.MinConns = maxWorkerCalls, 0
	retarget := func(c *pgconn.FallbackConfig) {
		c.Host, c.Port = host, port
		if c.TLSConfig != nil {
			c.TLSConfig = c.TLSConfig.Clone()
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
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		return proveWorker(ctx, conn, group)
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

// readOnWorker runs read, a read of worker's tenants, on worker's own
// pool when the store has one (readPool), else through the coordinator,
// where it also runs again when worker could not be reached directly.
func (s *Store) readOnWorker(worker int64, read func(db *pgxpool.Pool) error) error {
	if direct := s.readPool(worker); direct != nil {
		err := read(direct)
		if err == nil || !s.unreachable(worker, direct, err) {
			return err
		}
	}
	return read(s.pool)
}

// unreachable reports whether err, of a direct read of worker over pool,
// says that the worker could not be reached that way (no connection), not
// what the worker answered: then pool is dropped and the read is made
// through the coordinator.
func (s *Store) unreachable(worker int64, pool *pgxpool.Pool, err error) bool {
	var connect *pgconn.ConnectError
	if !errors.As(err, &connect) {
		return false
	}
	w := &s.workerReads
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.nodes[worker]; n != nil && n.pool == pool {
		n.pool, n.failedAt = nil, time.Now()
		if w.closed {
			pool.Close()
		} else {
			w.run(func(context.Context) { pool.Close() })
		}
		s.logger.Info("citus worker reads: the worker is read through the coordinator",
			"group", worker, "address", n.host+":"+strconv.Itoa(int(n.port)), "error", err)
	}
	return true
}
