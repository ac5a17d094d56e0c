package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// A statement bounded by the server is cancelled there and answered 57014,
// and the pool keeps the session; the session's own statement_timeout is
// untouched. One cut short by its context costs the session (the driver
// closes it), which is why the bound is the server's. In each query mode
// an operator may choose (default_query_exec_mode: mcpd's, and those for
// a pooler in transaction mode).
func TestQueryRowBoundedByServerKeepsTheSession(t *testing.T) {
	db := pgtest.NewDB(t)
	for _, mode := range []string{"cache_describe", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			testQueryRowBoundedByServer(t, pgtest.WithQuery(t, db.AppURL, "pool_max_conns=1&default_query_exec_mode="+mode))
		})
	}
}

func testQueryRowBoundedByServer(t *testing.T, databaseURL string) {
	ctx := t.Context()
	pool, err := Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	first := pgtest.BackendPID(t, pool)

	var answer int32
	if err := queryRowBoundedByServer(ctx, pool, time.Second, `SELECT $1::int4 + 1`, []any{int32(41)}, &answer); err != nil || answer != 42 {
		t.Fatalf("a bounded read of 41 + 1: %d, %v", answer, err)
	}
	var slept string
	err = queryRowBoundedByServer(ctx, pool, 50*time.Millisecond, `SELECT pg_sleep(30)::text`, nil, &slept)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.QueryCanceled {
		t.Fatalf("a bounded sleep past its bound: %v, want the server's 57014", err)
	}
	if pid := pgtest.BackendPID(t, pool); pid != first {
		t.Fatalf("after a bounded statement the server cancelled, the store's session is backend %d, before it %d", pid, first)
	}
	var timeout string
	if err := pool.QueryRow(ctx, `SHOW statement_timeout`).Scan(&timeout); err != nil || timeout != "0" {
		t.Fatalf("the session's statement_timeout after a bounded statement: %q, %v; want 0", timeout, err)
	}

	// What the bound avoids: the context cuts the same sleep short.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := pool.QueryRow(cctx, `SELECT pg_sleep(30)::text`).Scan(&slept); err == nil {
		t.Fatal("a sleep of 30 s ended within 50 ms")
	}
	if pid := pgtest.BackendPID(t, pool); pid == first {
		t.Fatalf("a statement cut short by its context kept its session (backend %d): the bound by the server would not be needed", pid)
	}
}
