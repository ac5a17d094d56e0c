package schema_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/migrations"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/schema"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func emptyDB(t *testing.T) *pgtest.DB {
	t.Helper()
	return pgtest.Shared(t).NewEmptyDB(t)
}

func current(t *testing.T, url string) schema.Status {
	t.Helper()
	st, err := schema.Current(context.Background(), url)
	if err != nil {
		t.Fatalf("Current: %v", err)
	}
	return st
}

func TestUpDownCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := emptyDB(t)
	latest := migrations.Latest

	if got, want := current(t, db.AdminURL), (schema.Status{Latest: latest, Engine: schema.EnginePostgreSQL}); got != want {
		t.Fatalf("fresh database: Current = %+v, want %+v", got, want)
	}
	if err := pgstore.CheckSchema(ctx, db.Admin); !errors.Is(err, pgstore.ErrSchemaMismatch) {
		t.Fatalf("fresh database: Check = %v, want ErrSchemaMismatch", err)
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up: %v", err)
	}
	at := func(v uint) schema.Status {
		return schema.Status{Version: v, Latest: latest, Applied: true, Engine: schema.EnginePostgreSQL}
	}
	if got := current(t, db.AdminURL); got != at(latest) {
		t.Fatalf("after Up: Current = %+v, want %+v", got, at(latest))
	}
	if err := pgstore.CheckSchema(ctx, db.Admin); err != nil {
		t.Fatalf("after Up: Check = %v", err)
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("second Up (no change) = %v, want nil", err)
	}
	if err := schema.Down(ctx, db.AdminURL, 1); err != nil {
		t.Fatalf("Down 1: %v", err)
	}
	if got := current(t, db.AdminURL); got != at(latest-1) {
		t.Fatalf("after Down 1: Current = %+v, want %+v", got, at(latest-1))
	}
	if err := pgstore.CheckSchema(ctx, db.Admin); !errors.Is(err, pgstore.ErrSchemaMismatch) {
		t.Fatalf("after Down 1: Check = %v, want ErrSchemaMismatch", err)
	}
	if err := schema.Down(ctx, db.AdminURL, 0); err != nil {
		t.Fatalf("Down all: %v", err)
	}
	if got, want := current(t, db.AdminURL), (schema.Status{Latest: latest, Engine: schema.EnginePostgreSQL}); got != want {
		t.Fatalf("after Down all: Current = %+v, want %+v", got, want)
	}
	if err := schema.Down(ctx, db.AdminURL, 0); err != nil {
		t.Fatalf("Down at zero = %v, want nil", err)
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up again: %v", err)
	}
	// More steps than applied stop at zero.
	if err := schema.Down(ctx, db.AdminURL, int(latest)+5); err != nil {
		t.Fatalf("Down %d: %v", latest+5, err)
	}
	if got := current(t, db.AdminURL); got.Applied {
		t.Fatalf("after Down past zero: Current = %+v, want nothing applied", got)
	}
}

func TestConnectionStringForms(t *testing.T) {
	t.Parallel()
	db := emptyDB(t)
	cfg, err := pgconn.ParseConfig(db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	forms := []string{
		db.AdminURL,
		strings.Replace(db.AdminURL, "postgres://", "postgresql://", 1),
		strings.Replace(db.AdminURL, "postgres://", "pgx5://", 1),
		fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, cfg.Database),
		// mcpd's own URL may carry pgxpool's keywords.
		pgtest.WithQuery(t, db.AdminURL, "pool_max_conns=4"),
	}
	if !strings.HasPrefix(cfg.Host, "/") {
		// A host list, the first of which refuses: libpq goes on to the next.
		forms = append(forms, fmt.Sprintf("postgres://%s@127.0.0.1:1,%s:%d/%s?sslmode=disable&target_session_attrs=read-write",
			cfg.User, cfg.Host, cfg.Port, cfg.Database))
	}
	if err := schema.Up(context.Background(), forms[3]); err != nil {
		t.Fatalf("Up with a DSN: %v", err)
	}
	want := schema.Status{Version: migrations.Latest, Latest: migrations.Latest, Applied: true, Engine: schema.EnginePostgreSQL}
	for _, f := range forms {
		if got := current(t, f); got != want {
			t.Errorf("Current(%s) = %+v, want %+v", f, got, want)
		}
	}
	if _, err := schema.Current(context.Background(), "mysql://u@h/d"); err == nil {
		t.Error("Current(mysql://...) = nil error")
	}
}

func TestUpRefusesDirtyAndNewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name, sql, want string
	}{
		{"dirty", `UPDATE schema_migrations SET dirty = true`, "dirty"},
		{"newer", fmt.Sprintf(`UPDATE schema_migrations SET version = %d`, migrations.Latest+1), "newer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.NewDB(t)
			if _, err := db.Admin.Exec(ctx, tt.sql); err != nil {
				t.Fatal(err)
			}
			var before int
			if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&before); err != nil {
				t.Fatal(err)
			}
			if err := schema.Up(ctx, db.AdminURL); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Up = %v, want an error saying %q", err, tt.want)
			}
			if err := schema.Down(ctx, db.AdminURL, 1); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Down = %v, want an error saying %q", err, tt.want)
			}
			var after int
			if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&after); err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatalf("tables %d -> %d: a refused migration changed the schema", before, after)
			}
		})
	}
	t.Run("dirty status", func(t *testing.T) {
		t.Parallel()
		db := pgtest.NewDB(t)
		if _, err := db.Admin.Exec(ctx, `UPDATE schema_migrations SET dirty = true`); err != nil {
			t.Fatal(err)
		}
		want := schema.Status{Version: migrations.Latest, Dirty: true, Latest: migrations.Latest, Applied: true, Engine: schema.EnginePostgreSQL}
		if got := current(t, db.AdminURL); got != want {
			t.Fatalf("Current = %+v, want %+v", got, want)
		}
	})
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	db := emptyDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := schema.Up(ctx, db.AdminURL); !errors.Is(err, context.Canceled) {
		t.Fatalf("Up(cancelled) = %v, want context.Canceled", err)
	}
	if err := schema.Down(ctx, db.AdminURL, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Down(cancelled) = %v, want context.Canceled", err)
	}
	if _, err := schema.Current(ctx, db.AdminURL); !errors.Is(err, context.Canceled) {
		t.Fatalf("Current(cancelled) = %v, want context.Canceled", err)
	}
	var n int
	if err := db.Admin.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a cancelled Up made %d tables", n)
	}
}

// TestContextEndsLockWait: another migrator holds golang-migrate's lock;
// Up waits for it until ctx ends, then returns ctx's error, leaving the
// database as it was.
func TestContextEndsLockWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := emptyDB(t)
	// The version table must exist for the lock id to be the one the driver
	// takes; Current makes it.
	current(t, db.AdminURL)
	lockID, err := database.GenerateAdvisoryLockId("/"+db.Name, "public", "schema_migrations") // the driver names the database by the URL path
	if err != nil {
		t.Fatal(err)
	}
	holder, err := db.Admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1::bigint)`, lockID); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err = schema.Up(tctx, db.AdminURL)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Up while the lock is held = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Up took %v to give up", d)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1::bigint)`, lockID); err != nil {
		t.Fatal(err)
	}
	if got, want := current(t, db.AdminURL), (schema.Status{Latest: migrations.Latest, Engine: schema.EnginePostgreSQL}); got != want {
		t.Fatalf("after the cancelled Up: Current = %+v, want %+v", got, want)
	}
	if err := schema.Up(ctx, db.AdminURL); err != nil {
		t.Fatalf("Up once the lock is free: %v", err)
	}
}

// TestUpWhileAnotherDatabaseCreatesTheRole migrates a database while another
// session of the cluster is creating cyberos_app (as a migration of another
// database on the same server does): Up must not fail on the role that
// appeared meanwhile.
func TestUpWhileAnotherDatabaseCreatesTheRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.NewCluster(t) // a cluster without cyberos_app
	other, db := c.NewEmptyDB(t), c.NewEmptyDB(t)

	tx, err := other.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `CREATE ROLE cyberos_app NOLOGIN`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- schema.Up(ctx, db.AdminURL) }()

	// Wait (bounded) until Up blocks on the uncommitted role.
	testwait.Until(t, "Up waiting for the other session's role", 20*time.Second, func() bool {
		var waiting bool
		if err := other.Admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = $1 AND wait_event_type = 'Lock' AND wait_event = 'transactionid')`, db.Name).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("Up returned %v before the role was committed", err)
		default:
		}
		return waiting
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Up: %v", err)
	}
	if got, want := current(t, db.AdminURL), (schema.Status{Version: migrations.Latest, Latest: migrations.Latest, Applied: true, Engine: schema.EnginePostgreSQL}); got != want {
		t.Fatalf("Current = %+v, want %+v", got, want)
	}
}
