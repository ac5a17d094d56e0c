package pgtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// Through the pooler, each transaction of a client may run on another
// server connection: what a session keeps (a SET, a prepared statement)
// does not follow it, while a transaction stays on one connection.
func TestPgBouncerTransactionMode(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	bouncer := c.StartPgBouncer(t, pgtest.PgBouncerOptions{PoolSize: 2})
	db := c.NewDB(t)
	ctx := context.Background()

	// The app role logs in through it and reaches its own database.
	cfg, err := pgx.ParseConfig(bouncer.URL(db.AppURL) + "&default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var user, dbname string
	if err := conn.QueryRow(ctx, `SELECT current_user, current_database()`).Scan(&user, &dbname); err != nil {
		t.Fatal(err)
	}
	if dbname != db.Name || user == "" {
		t.Fatalf("through pgbouncer: user %q, database %q; want the app role on %s", user, dbname, db.Name)
	}

	// Session state leaks between clients: a SET of one client is seen by
	// another whose transaction lands on the same server connection, which
	// is what a pooler in session mode would never show. Several clients
	// on a pool of two server connections make that certain.
	other, err := pgxpool.New(ctx, bouncer.URL(db.AppURL)+"&default_query_exec_mode=exec&pool_max_conns=6")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := conn.Exec(ctx, `SET work_mem = '12345kB'`); err != nil {
		t.Fatal(err)
	}
	seen := false
	for range 20 {
		var name string
		if err := other.QueryRow(ctx, `SELECT current_setting('work_mem')`).Scan(&name); err != nil {
			t.Fatal(err)
		}
		if name == "12345kB" {
			seen = true
			break
		}
	}
	if !seen {
		t.Fatal("a session SET of one client never reached another: pgbouncer is not pooling transactions")
	}

	// The driver's default, named prepared statements, fails behind it.
	cached, err := pgxpool.New(ctx, bouncer.URL(db.AppURL)+"&pool_max_conns=6")
	if err != nil {
		t.Fatal(err)
	}
	defer cached.Close()
	var clients []*pgxpool.Conn
	for range 3 {
		c, err := cached.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		clients = append(clients, c)
	}
	var failed error
	for i := range 30 {
		var n int
		if err := clients[i%len(clients)].QueryRow(ctx, `SELECT $1::int`, i).Scan(&n); err != nil {
			failed = err
			break
		}
	}
	var pgErr *pgconn.PgError
	if !errors.As(failed, &pgErr) || (pgErr.Code != "42P05" && pgErr.Code != "26000") {
		t.Fatalf("named prepared statements through pgbouncer: %v; want 42P05 or 26000 at some point", failed)
	}
}
