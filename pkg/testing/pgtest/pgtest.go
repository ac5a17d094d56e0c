package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/cyberos/mcpd/pkg/pgsession"
	"github.com/cyberos/mcpd/pkg/schema"
)

// EnvDatabaseURL names the environment variable with a superuser URL of a
// PostgreSQL server for Shared to use instead of starting one.
const EnvDatabaseURL = "MCPD_TEST_DATABASE_URL"

// EnvEngine names the environment variable that chooses where NewDB makes
// databases: postgres (or unset), the shared cluster; citus, the shared
// Citus cluster (SharedCitus), so that a package's tests run against a
// Citus coordinator. Tests that ask for a cluster themselves (Shared,
// StartCluster, NewCitus) are not moved.
const EnvEngine = "MCPD_TEST_ENGINE"

// OnCitus reports whether EnvEngine puts NewDB's databases on Citus.
func OnCitus() bool { return os.Getenv(EnvEngine) == "citus" }

var (
	running atomic.Bool // inside Run

	sharedMu  sync.Mutex
	shared    *Cluster
	sharedErr error
)

// Run runs the tests of m, then stops the shared cluster, whether the tests
// passed, failed or panicked (a panic ends the process: the cluster's
// watchdog stops it then), and then, when the tests passed, fails the run if
// goroutines were left behind (as goleak.VerifyTestMain does). Use it as
// func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }.
func Run(m *testing.M) (code int) {
	running.Store(true)
	defer func() {
		running.Store(false)
		if err := stopShared(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop the shared cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}()
	code = m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stop the shared cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	return code
}

func stopShared() error {
	if err := stopCitus(); err != nil {
		return err
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	c := shared
	shared, sharedErr = nil, nil
	if c == nil {
		return nil
	}
	return c.Destroy()
}

// Shared returns the test binary's shared cluster, starting it on first use:
// the server of MCPD_TEST_DATABASE_URL when that is set, else a cluster of
// its own. It fails the test when PostgreSQL cannot be had (never skips),
// and when TestMain does not call Run.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	if !running.Load() {
		t.Fatalf("pgtest: the test binary's TestMain must call pgtest.Run: func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }")
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		start := time.Now()
		if conn := os.Getenv(EnvDatabaseURL); conn != "" {
			shared, sharedErr = externalCluster(conn)
		} else {
			shared, sharedErr = startCluster(ClusterOptions{})
		}
		if sharedErr == nil {
			shared.shared = true
			t.Logf("pgtest: shared PostgreSQL cluster on port %d ready in %v", shared.port, time.Since(start).Round(time.Millisecond))
		}
	}
	if sharedErr != nil {
		t.Fatalf("pgtest: %v", sharedErr)
	}
	return shared
}

// DB is a database of its own for one test, dropped in t.Cleanup.
type DB struct {
	// Name is the database's name.
	Name string
	// AdminURL connects as the superuser that owns the database.
	AdminURL string
	// AppURL connects as the app login role: a member of cyberos_app and of
	// nothing else, no superuser, no BYPASSRLS, owner of nothing. Empty for a
	// database of NewEmptyDB.
	AppURL string
	// Admin is a pool of AdminURL.
	Admin *pgxpool.Pool
	// App is a pool of AppURL; nil for a database of NewEmptyDB.
	App *pgxpool.Pool
}

// Engine is a cluster that makes databases for mcpd and can put pgbouncer
// in front of itself: a PostgreSQL cluster, or a Citus cluster (its
// coordinator).
type Engine interface {
	NewDB(t testing.TB) *DB
	StartPgBouncer(t testing.TB, opts PgBouncerOptions) *PgBouncer
}

// SharedEngine is the engine of NewDB: the shared cluster, or the shared
// Citus cluster with MCPD_TEST_ENGINE=citus.
func SharedEngine(t testing.TB) Engine {
	t.Helper()
	switch engine := os.Getenv(EnvEngine); engine {
	case "", "postgres":
		return Shared(t)
	case "citus":
		// Asked for by name: never a skip, which would pass having run
		// nothing on Citus.
		if ok, err := citusInstalled(); err != nil || !ok {
			t.Fatalf("pgtest: %s=citus, but Citus is not installed (%v): %s", EnvEngine, err, InstallCitus)
		}
		return SharedCitus(t)
	default:
		t.Fatalf("pgtest: %s=%q: want postgres or citus", EnvEngine, engine)
		return nil
	}
}

// NewDB returns a fresh database of the shared cluster (of the shared Citus
// cluster with MCPD_TEST_ENGINE=citus), at the latest schema version: see
// (*Cluster).NewDB.
func NewDB(t testing.TB) *DB {
	t.Helper()
	return SharedEngine(t).NewDB(t)
}

// NewDB returns a fresh database, cloned from the cluster's template that
// was migrated to the latest schema version once (CREATE DATABASE ...
// TEMPLATE), with pools for the superuser and the app role. It is dropped in
// t.Cleanup.
func (c *Cluster) NewDB(t testing.TB) *DB {
	t.Helper()
	if err := c.ensureTemplate(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return c.newDB(t, c.template, true)
}

// NewEmptyDB returns a new database without any migration (created from
// template0), for tests of migrating itself; App and AppURL are empty. It is
// dropped in t.Cleanup.
func (c *Cluster) NewEmptyDB(t testing.TB) *DB {
	t.Helper()
	return c.newDB(t, "template0", false)
}

var dbCounter atomic.Uint64

func (c *Cluster) newDB(t testing.TB, template string, withApp bool) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	maint, err := c.maintPool()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := fmt.Sprintf("mcpd_test_%d_%s", dbCounter.Add(1), randomHex(3))
	if _, err := maint.Exec(ctx, c.createDatabaseSQL(name, template)); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	db := &DB{Name: name, AdminURL: c.connString("", "", name)}
	t.Cleanup(func() {
		if db.App != nil {
			db.App.Close()
		}
		if db.Admin != nil {
			db.Admin.Close()
		}
		if err := c.dropDB(context.Background(), name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	if db.Admin, err = newPool(ctx, db.AdminURL); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if withApp {
		db.AppURL = c.connString(c.appRole, c.appPass, name)
		if db.App, err = newPool(ctx, db.AppURL); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	return db
}

func (c *Cluster) maintPool() (*pgxpool.Pool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running || c.maint == nil {
		return nil, fmt.Errorf("the cluster on port %d is stopped", c.port)
	}
	return c.maint, nil
}

// dropDB drops a test database; a stopped cluster is left alone, its
// directory goes with it.
func (c *Cluster) dropDB(ctx context.Context, name string) error {
	// Not under c.mu for the drop's time: a drop can wait seconds, and
	// the databases of other tests are made meanwhile (Citus.drop).
	maint, err := c.maintPool()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		_, err := maint.Exec(ctx, c.dropDatabaseSQL(name))
		// A session that FORCE does not end, such as the Citus maintenance
		// daemon starting in the database, makes it busy for a moment: try
		// again.
		var pgErr *pgconn.PgError
		if err == nil || attempt == 20 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			if err != nil {
				return fmt.Errorf("drop database %s: %w", name, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop database %s: %w", name, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) createDatabaseSQL(name, template string) string {
	q := `CREATE DATABASE ` + ident(name) + ` TEMPLATE ` + ident(template)
	if c.serverNum >= 150000 {
		// FILE_COPY copies the template's few files; WAL_LOG, the default
		// since 15, writes every block to the WAL and is slower here.
		q += ` STRATEGY FILE_COPY`
	}
	return q
}

func (c *Cluster) dropDatabaseSQL(name string) string {
	q := `DROP DATABASE IF EXISTS ` + ident(name)
	if c.serverNum >= 130000 {
		q += ` WITH (FORCE)`
	}
	return q
}

// ensureTemplate makes, once per cluster, the template database migrated to
// the latest version and the app login role that holds cyberos_app.
func (c *Cluster) ensureTemplate() error {
	c.tmplOnce.Do(func() { c.tmplErr = c.makeTemplate() })
	return c.tmplErr
}

func (c *Cluster) makeTemplate() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	maint, err := c.maintPool()
	if err != nil {
		return err
	}
	if _, err := maint.Exec(ctx, `CREATE DATABASE `+ident(c.template)+` TEMPLATE template0`); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	if err := schema.Up(ctx, c.connString("", "", c.template)); err != nil {
		return fmt.Errorf("migrate the template database: %w", err)
	}
	create := `CREATE ROLE ` + ident(c.appRole) + ` LOGIN INHERIT NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION`
	if c.appPass != "" {
		create += ` PASSWORD ` + literal(c.appPass)
	}
	if _, err := maint.Exec(ctx, create); err != nil {
		return fmt.Errorf("create the app role: %w", err)
	}
	if _, err := maint.Exec(ctx, `GRANT cyberos_app TO `+ident(c.appRole)); err != nil {
		return fmt.Errorf("grant cyberos_app: %w", err)
	}
	// A template no one connects to: CREATE DATABASE refuses to copy a
	// database that has sessions.
	if _, err := maint.Exec(ctx, `ALTER DATABASE `+ident(c.template)+` IS_TEMPLATE true ALLOW_CONNECTIONS false`); err != nil {
		return fmt.Errorf("mark the template: %w", err)
	}
	return nil
}

func newPool(ctx context.Context, conn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(conn)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	// As pgstore.Connect makes mcpd's connections.
	cfg.AfterConnect = pgsession.AfterConnect(cfg.AfterConnect)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	return pool, nil
}

// WithQuery returns the URL raw with query (already escaped) added to its
// query string.
func WithQuery(t testing.TB, raw, query string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += query
	return u.String()
}

// BackendPID returns the server process of the session pool runs its next
// statement on: with one connection in the pool (pool_max_conns=1), the
// same process twice means that the pool kept that session.
func BackendPID(t testing.TB, pool *pgxpool.Pool) int32 {
	t.Helper()
	var pid int32
	if err := pool.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// withDatabase returns conn (a URL or a key=value DSN) naming database.
func withDatabase(conn, database string) string {
	if u, ok := parseURL(conn); ok {
		q := u.Query()
		q.Del("dbname")
		u.RawQuery = q.Encode()
		u.Path = "/" + database
		return u.String()
	}
	// In a DSN the last of repeated keywords wins.
	return conn + " dbname=" + dsnQuote(database)
}

// withUser returns conn (a URL or a key=value DSN) logging in as user.
func withUser(conn, user, password string) string {
	if u, ok := parseURL(conn); ok {
		q := u.Query()
		q.Del("user")
		q.Del("password")
		u.RawQuery = q.Encode()
		u.User = url.UserPassword(user, password)
		return u.String()
	}
	return conn + " user=" + dsnQuote(user) + " password=" + dsnQuote(password)
}

func parseURL(conn string) (*url.URL, bool) {
	if !strings.HasPrefix(conn, "postgres://") && !strings.HasPrefix(conn, "postgresql://") {
		return nil, false
	}
	u, err := url.Parse(conn)
	return u, err == nil
}

func dsnQuote(s string) string {
	return `'` + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + `'`
}

// ident quotes an SQL identifier.
func ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// literal quotes an SQL string literal.
func literal(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("pgtest: random: %v", err))
	}
	return hex.EncodeToString(b)
}
