package pgstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Writes that a read-only database must refuse. PostgreSQL refuses a write
// in a read-only transaction itself, but a Citus coordinator hands a call
// of a delegated function (pkg/schema's delegatedFunctions: registration,
// the heartbeat and held-heartbeat calls, the sweep of a tenant and its
// marks) whole to a worker, in a transaction of the worker's own that does
// not follow the coordinator's default_transaction_read_only (Citus's
// BeginTransactionCommand says so): on a coordinator made read-only, such
// a call would write. So on Citus the store asks the coordinator, on the
// connection that will make the call (for a call made on the worker
// itself, on one of its own: writeConn) and just before it, whether its
// transactions are read-only (or it is a standby), and refuses the call
// when they are, with the error a refused write has:
// registry.ErrUnavailable. One more round trip per call (a batch, a flush
// group, a registration, a tenant's sweep); what the session reports to
// the client cannot stand in for it, as a backend takes a reloaded
// setting when it reads its next statement and reports it only after
// running that statement.

// errReadOnlySession is the error of a write refused on a read-only
// session.
var errReadOnlySession = fmt.Errorf("%w: %w", registry.ErrUnavailable, ErrReadOnly)

// readOnlySQL asks the server whether the session's transactions are
// read-only.
const readOnlySQL = `SELECT current_setting('transaction_read_only')::boolean OR pg_is_in_recovery()`

// acquireWritable acquires a connection of the pool whose session may
// write.
func (s *Store) acquireWritable(ctx context.Context) (*pgxpool.Conn, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	var readOnly bool
	if err := c.QueryRow(ctx, readOnlySQL).Scan(&readOnly); err != nil {
		c.Release()
		return nil, err
	}
	if readOnly {
		c.Release()
		return nil, errReadOnlySession
	}
	return c, nil
}

// acquireForCall acquires a connection for a statement that calls a
// delegated function: on Citus (delegates), one whose session may write.
func (s *Store) acquireForCall(ctx context.Context) (*pgxpool.Conn, error) {
	if s.delegates(ctx) {
		return s.acquireWritable(ctx)
	}
	return s.pool.Acquire(ctx)
}

// delegates reports whether the database may hand delegated functions to
// workers (Citus, or not known yet), where writeQuery and the others check
// the session first; on plain PostgreSQL they are the pool's own.
func (s *Store) delegates(ctx context.Context) bool {
	citus, err := s.onCitus(ctx)
	return err != nil || citus
}

// writeQuery is the pool's Query for a statement that calls a delegated
// function: on Citus, on a session that may write. The rows release their
// connection when closed or read to the end.
func (s *Store) writeQuery(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return s.writeQueryOn(ctx, 0, sql, args...)
}

// writeQueryOn is writeQuery for a call whose tenants are all of the
// Citus worker group worker (0: not known), made on that worker itself
// when the store can (writeConn).
func (s *Store) writeQueryOn(ctx context.Context, worker int64, sql string, args ...any) (pgx.Rows, error) {
	if !s.delegates(ctx) {
		return s.pool.Query(ctx, sql, args...)
	}
	c, err := s.writeConn(ctx, worker)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &releasingRows{Rows: rows, conn: c}, nil
}

// writeQueryRowOn is the pool's QueryRow for a statement that calls a
// delegated function, as writeQueryOn.
func (s *Store) writeQueryRowOn(ctx context.Context, worker int64, sql string, args ...any) pgx.Row {
	if !s.delegates(ctx) {
		return s.pool.QueryRow(ctx, sql, args...)
	}
	c, err := s.writeConn(ctx, worker)
	if err != nil {
		return errRow{err}
	}
	return releasingRow{row: c.QueryRow(ctx, sql, args...), conn: c}
}

// A call of a delegated function whose tenants are all of one worker is
// made on that worker's own connection when the store has a pool to it
// (workerreads.go), not handed to it by the coordinator: the worker's
// Citus runs the function there, locally, as the coordinator's delegation
// would, and the coordinator neither plans the call nor carries its rows
// (docs/performance.md, "Delegated calls made on the worker"). Before
// each such call the coordinator says, in one statement
// (workerCallCheckSQL), whether the database may write, so that a
// coordinator made read-only refuses these calls as it refuses its own,
// and whether it still lists the pool's address as the primary of the
// worker's group: a node the coordinator no longer routes to (one
// replaced by citus_update_node, or disabled) would take writes that no
// read through the coordinator sees, so its pool is dropped, the
// addresses are read again and the call goes through the coordinator. A
// write the worker's own settings refuse fails there as on the
// coordinator's delegation. The session options of --database-url apply
// to the worker's session as to the coordinator's.

// workerCallCheckSQL asks the coordinator whether the session's
// transactions are read-only (readOnlySQL), and whether it lists $2:$3 as
// the active primary of worker group $1.
const workerCallCheckSQL = readOnlySQL + `,
	EXISTS (SELECT FROM pg_dist_node WHERE groupid = $1::integer AND noderole = 'primary' AND isactive
		AND nodename = $2::text AND nodeport = $3::integer)`

// writeConn returns a connection for a call of a delegated function whose
// tenants are all of the worker group worker (0: not known), whose
// session may write: worker's own (workerPool) when the store has a pool to
// it that gives a connection and the coordinator lists its address, else
// the coordinator's.
func (s *Store) writeConn(ctx context.Context, worker int64) (*pgxpool.Conn, error) {
	direct, host, port := s.workerPoolAt(worker)
	if direct == nil {
		return s.acquireWritable(ctx)
	}
	wc, err := direct.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		s.unreachable(worker, direct, err)
		return s.acquireWritable(ctx)
	}
	var readOnly, listed bool
	err = s.pool.QueryRow(ctx, workerCallCheckSQL, worker, host, int32(port)).Scan(&readOnly, &listed)
	switch {
	case err != nil:
		wc.Release()
		return nil, err
	case readOnly:
		wc.Release()
		return nil, errReadOnlySession
	case !listed:
		wc.Release()
		s.unlisted(worker, direct)
		return s.acquireWritable(ctx)
	}
	s.workerReads.writes.Add(1)
	return wc, nil
}

// releasingRows are rows that release their connection once closed or
// read to the end, as the pool's own do.
type releasingRows struct {
	pgx.Rows
	conn *pgxpool.Conn
	once sync.Once
}

func (r *releasingRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *releasingRows) Close() {
	r.Rows.Close()
	r.once.Do(r.conn.Release)
}

// releasingRow is a row that releases its connection once scanned.
type releasingRow struct {
	row  pgx.Row
	conn *pgxpool.Conn
}

func (r releasingRow) Scan(dest ...any) error {
	defer r.conn.Release()
	return r.row.Scan(dest...)
}

// errRow is a row whose Scan returns err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
