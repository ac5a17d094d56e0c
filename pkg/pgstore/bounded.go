package pgstore

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// queryRowBoundedByServer runs sql with args and scans its one row into
// dest, with the statement bounded by the server itself: statement_timeout
// of bound, set for that statement alone (in the same round trip), so that
// a statement that runs too long is cancelled and answered 57014, and the
// session goes back to the pool. A statement cut short by the context
// instead costs its session (the driver closes it), and on Citus each new
// session on the coordinator opens its own connections to the workers.
// The context is given bound twice over, for the answer to come back.
func queryRowBoundedByServer(ctx context.Context, pool *pgxpool.Pool, bound time.Duration, sql string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*bound)
	defer cancel()
	var b pgx.Batch
	// Local to the pipeline's one implicit transaction: the statement
	// after it starts with the bound, the session keeps its own.
	b.Queue(`SELECT set_config('statement_timeout', $1, true)`, strconv.FormatInt(max(bound.Milliseconds(), 1), 10))
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return row.Scan(dest...) })
	return pool.SendBatch(ctx, &b).Close()
}
