package schema

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/database/postgres"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/lib/pq"

	"github.com/cyberos/mcpd/migrations"
)

// Status is the migration state of a database.
type Status struct {
	// Version is the last migration applied (0 when none is).
	Version uint
	// Dirty reports a migration that started and did not finish; it must be
	// repaired by hand before anything else is migrated.
	Dirty bool
	// Latest is the version this build expects (migrations.Latest).
	Latest uint
	// Applied is false when no migration is applied.
	Applied bool
	// Engine is what the database is (Current sets it): EnginePostgreSQL,
	// or EngineCitus, whose tables migrate up distributes.
	Engine string
}

// Up migrates the database to migrations.Latest, one migration at a time. A
// database already there is not an error; one at a newer version than this
// build knows, or dirty, is.
//
// Cancelling ctx stops before the next migration and ends a wait for another
// migrator's lock; a migration that is running is let finish, so that a
// cancel never leaves the schema dirty.
func Up(ctx context.Context, databaseURL string) error {
	return withMigrate(ctx, databaseURL, "migrate up", func(r *runner) error {
		for {
			st, err := r.status()
			if err != nil {
				return err
			}
			if st.Dirty {
				return fmt.Errorf("database is dirty at version %d: repair it and force a version first", st.Version)
			}
			if st.Applied && st.Version > migrations.Latest {
				return fmt.Errorf("database is at version %d, newer than this build's %d", st.Version, migrations.Latest)
			}
			if st.Applied && st.Version == migrations.Latest {
				return r.finish(ctx)
			}
			if err := r.step(ctx, 1); err != nil {
				return err
			}
		}
	})
}

// Down reverts the given number of migrations; steps <= 0 reverts all of
// them. Asking for more steps than are applied stops at zero without error.
// ctx is honoured as by Up.
func Down(ctx context.Context, databaseURL string, steps int) error {
	return withMigrate(ctx, databaseURL, "migrate down", func(r *runner) error {
		for n := 0; steps <= 0 || n < steps; n++ {
			st, err := r.status()
			if err != nil {
				return err
			}
			if st.Dirty {
				return fmt.Errorf("database is dirty at version %d: repair it and force a version first", st.Version)
			}
			if !st.Applied {
				return nil
			}
			if st.Version > migrations.Latest {
				return fmt.Errorf("database is at version %d, newer than this build's %d", st.Version, migrations.Latest)
			}
			if err := r.step(ctx, -1); err != nil {
				return err
			}
		}
		return nil
	})
}

// Current reports the migration state of the database. Like every
// golang-migrate client it creates the empty schema_migrations table when the
// database has none.
func Current(ctx context.Context, databaseURL string) (Status, error) {
	var st Status
	err := withMigrate(ctx, databaseURL, "migrate status", func(r *runner) error {
		var err error
		if st, err = r.status(); err != nil {
			return err
		}
		db := sql.OpenDB(r.conn)
		defer db.Close()
		citus, err := isCitus(ctx, db)
		if err != nil {
			return fmt.Errorf("detect citus: %w", shortError(err))
		}
		st.Engine = EnginePostgreSQL
		if citus {
			st.Engine = EngineCitus
		}
		return nil
	})
	return st, err
}

// runner is one open golang-migrate instance.
type runner struct {
	m   *migrate.Migrate
	src source.Driver
	drv database.Driver
	// kick starts cancelling this instance's advisory lock waits.
	kick func()
	// conn connects to the database for statements of its own.
	conn driver.Connector
}

// status reads the version through the driver: migrate.Version hides a
// dirty first migration (version -1, dirty) as "no version".
func (r *runner) status() (Status, error) {
	v, dirty, err := r.drv.Version()
	if err != nil {
		return Status{}, fmt.Errorf("read version: %w", shortError(err))
	}
	st := Status{Dirty: dirty, Latest: migrations.Latest}
	if v >= 0 {
		st.Version = uint(v)
		st.Applied = true
	}
	return st, nil
}

// finish does, under the migrator's lock, what follows the last numbered
// migration: on Citus it distributes the tables (citus.go), it applies
// this build's functions when the database holds another set, and on Citus
// it marks the functions that Citus hands to the workers.
func (r *runner) finish(ctx context.Context) (err error) {
	if err := r.drv.Lock(); err != nil {
		return fmt.Errorf("lock: %w", shortError(err))
	}
	defer func() {
		if uerr := r.drv.Unlock(); uerr != nil && err == nil {
			err = fmt.Errorf("unlock: %w", shortError(uerr))
		}
	}()
	// Another migrator may have moved the schema before the lock was ours.
	st, err := r.status()
	if err != nil {
		return err
	}
	if st.Dirty || !st.Applied || st.Version != migrations.Latest {
		return fmt.Errorf("database moved to version %d (dirty %t) while this migrate up ran", st.Version, st.Dirty)
	}
	db := sql.OpenDB(r.conn)
	defer db.Close()
	citus, err := isCitus(ctx, db)
	if err != nil {
		return fmt.Errorf("detect citus: %w", shortError(err))
	}
	// Functions made before the tables were distributed (a database that
	// ran on plain PostgreSQL before Citus, or a run cut short after it
	// distributed them) are on the coordinator alone: made again, Citus
	// makes them on the workers too.
	var again bool
	if citus {
		if err := distribute(ctx, db); err != nil {
			return fmt.Errorf("distribute on citus: %w", shortError(err))
		}
		if again, err = functionsOnCoordinatorOnly(ctx, db); err != nil {
			return fmt.Errorf("functions on the workers: %w", shortError(err))
		}
	}
	if err := applyFunctions(ctx, db, again); err != nil {
		return fmt.Errorf("functions: %w", shortError(err))
	}
	if citus {
		if err := delegate(ctx, db); err != nil {
			return fmt.Errorf("delegate functions on citus: %w", shortError(err))
		}
	}
	return nil
}

// applyFunctions creates or replaces every function of migrations.Functions
// and records their digest, in one transaction, unless the database holds
// that set already and again is false.
func applyFunctions(ctx context.Context, db *sql.DB, again bool) error {
	digest := migrations.FunctionsDigest()
	var have string
	err := db.QueryRowContext(ctx, `SELECT digest FROM mcp_schema_functions`).Scan(&have)
	switch {
	case err == nil && have == digest && !again:
		return nil
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, f := range migrations.Functions() {
		// No arguments: the simple protocol, which takes several
		// statements in one call.
		if _, err := tx.ExecContext(ctx, f.SQL); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO mcp_schema_functions (digest) VALUES ($1)
ON CONFLICT (singleton) DO UPDATE SET digest = EXCLUDED.digest, applied_at = now()`, digest); err != nil {
		return fmt.Errorf("record the functions: %w", err)
	}
	return tx.Commit()
}

// step applies one migration up (n = 1) or down (n = -1). Stepping one at a
// time keeps ctx checked between migrations, and leaves no golang-migrate
// prefetch goroutine behind, which a GracefulStop in the middle of Up would.
func (r *runner) step(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := r.stepName(n)
	err := r.m.Steps(n)
	if errors.Is(err, migrate.ErrLockTimeout) {
		// The driver is still blocked in pg_advisory_lock; end that wait so
		// that the instance can close.
		r.kick()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, shortError(err))
	}
	return nil
}

// stepName names the migration that step n would run, for errors:
// "migration 3 up".
func (r *runner) stepName(n int) string {
	v, _, err := r.drv.Version()
	if err != nil {
		return "migration"
	}
	if n < 0 {
		return fmt.Sprintf("migration %d down", v)
	}
	var next uint
	if v < 0 {
		next, err = r.src.First()
	} else {
		next, err = r.src.Next(uint(v))
	}
	if err != nil {
		return "migration"
	}
	return fmt.Sprintf("migration %d up", next)
}

// dbError is golang-migrate's database.Error without the text of the whole
// migration, and with its cause (a *pq.Error) reachable by errors.As.
type dbError struct{ e database.Error }

func (d dbError) Error() string {
	msg := d.e.Err
	if msg == "" && d.e.OrigErr != nil {
		msg = d.e.OrigErr.Error()
	}
	if d.e.Line > 0 {
		msg += fmt.Sprintf(" (line %d)", d.e.Line)
	}
	return msg
}

func (d dbError) Unwrap() error { return d.e.OrigErr }

func shortError(err error) error {
	var v database.Error
	if errors.As(err, &v) {
		return dbError{v}
	}
	var p *database.Error
	if errors.As(err, &p) {
		return dbError{*p}
	}
	return err
}

// lockTimeout bounds the wait for another migrator's lock before a step;
// ctx can end it earlier.
const lockTimeout = 30 * time.Second

// withMigrate opens a migrate instance on databaseURL, runs fn and closes the
// instance. While ctx is done (or a lock wait timed out), it cancels this
// instance's waits for golang-migrate's advisory lock, which the driver would
// otherwise wait for without end.
func withMigrate(ctx context.Context, databaseURL, op string, fn func(*runner) error) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	connector, lockName, appName, err := prepareConn(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return fmt.Errorf("%s: read migrations: %w", op, err)
	}

	c := startCanceller(ctx, connector, appName)
	defer c.stop()

	drv, err := openDriver(connector, lockName)
	if err != nil {
		_ = src.Close()
		return fmt.Errorf("%s: %w", op, ctxErrOr(ctx, fmt.Errorf("open database: %w", shortError(err))))
	}
	m, err := migrate.NewWithInstance("iofs", src, "postgres", drv)
	if err != nil {
		_ = src.Close()
		_ = drv.Close()
		return fmt.Errorf("%s: %w", op, err)
	}
	m.LockTimeout = lockTimeout
	defer func() {
		srcErr, dbErr := m.Close()
		if cerr := errors.Join(srcErr, dbErr); cerr != nil && err == nil {
			err = fmt.Errorf("%s: close: %w", op, cerr)
		}
	}()

	if err := fn(&runner{m: m, src: src, drv: drv, kick: c.kick, conn: connector}); err != nil {
		return fmt.Errorf("%s: %w", op, ctxErrOr(ctx, err))
	}
	return nil
}

// ctxErrOr returns ctx's error when ctx is done (the cause of a cancelled
// query or lock wait), else err.
func ctxErrOr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return errors.Join(ctxErr, err)
	}
	return err
}

// ValidateURL reports whether databaseURL is a connection string that
// migrations can use: a postgres://, postgresql:// or pgx5:// URL or a libpq
// key=value string. The error never quotes the string, which may hold a
// password.
func ValidateURL(databaseURL string) error {
	_, _, _, err := prepareConn(context.Background(), databaseURL)
	return err
}

// prepareConn reads databaseURL into a connector with a unique
// application_name, which marks this instance's sessions, and a
// connect_timeout from ctx's deadline unless one is set; and the name by
// which golang-migrate's driver names the database in its lock id.
//
// Keywords that only pgx and pgxpool read (mcpd's --database-url may hold
// pool_max_conns) are dropped, and sslmode defaults to prefer as in libpq
// when neither the string nor PGSSLMODE sets it.
func prepareConn(ctx context.Context, databaseURL string) (connector *pq.Connector, lockName, appName string, err error) {
	cfg, err := parseConnString(databaseURL)
	if err != nil {
		return nil, "", "", err
	}
	params := make(map[string]string, len(cfg.params)+3)
	for k, v := range cfg.params {
		if !clientOnlyKey(k) {
			params[k] = v
		}
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, "", "", fmt.Errorf("application name: %w", err)
	}
	appName = "mcpd-migrate-" + hex.EncodeToString(b[:])
	params["application_name"] = appName
	if deadline, ok := ctx.Deadline(); ok && params["connect_timeout"] == "" {
		secs := math.Ceil(time.Until(deadline).Seconds())
		params["connect_timeout"] = strconv.Itoa(max(1, int(secs)))
	}
	if _, ok := params["sslmode"]; !ok && os.Getenv("PGSSLMODE") == "" {
		params["sslmode"] = "prefer"
	}
	connector, err = pq.NewConnector(dsn(params))
	if err != nil {
		return nil, "", "", fmt.Errorf("database url: %w", err)
	}
	return connector, cfg.lockName, appName, nil
}

// openDriver opens golang-migrate's postgres driver on connector as its
// postgres:// Open would, with one difference: when the driver fails to
// start (no answer, a lock wait cancelled), Open leaves its connection open;
// this closes it.
func openDriver(connector driver.Connector, lockName string) (database.Driver, error) {
	tc := &trackingConnector{Connector: connector}
	db := sql.OpenDB(tc)
	drv, err := postgres.WithInstance(db, &postgres.Config{DatabaseName: lockName})
	if err != nil {
		_ = db.Close()
		tc.closeAll()
		return nil, err
	}
	return drv, nil
}

// trackingConnector remembers the connections it made, so that a failed
// start can close the one that golang-migrate's driver took and never gave
// back.
type trackingConnector struct {
	driver.Connector
	mu    sync.Mutex
	conns []driver.Conn
}

func (c *trackingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

func (c *trackingConnector) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// canceller ends the advisory lock waits of one migrate instance's sessions
// (known by their application_name) from a connection of its own, once ctx
// is done or kick is called, until stop.
type canceller struct {
	kickCh   chan struct{}
	kickOnce sync.Once
	stopCh   chan struct{}
	done     chan struct{}
}

func startCanceller(ctx context.Context, connector driver.Connector, appName string) *canceller {
	c := &canceller{
		kickCh: make(chan struct{}),
		stopCh: make(chan struct{}),
		done:   make(chan struct{}),
	}
	go func() {
		defer close(c.done)
		select {
		case <-c.stopCh:
			return
		case <-ctx.Done():
		case <-c.kickCh:
		}
		// database/sql reconnects after a failed try.
		db := sql.OpenDB(connector)
		db.SetMaxOpenConns(1)
		defer db.Close()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			cancelLockWaits(db, appName)
			select {
			case <-c.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	return c
}

func (c *canceller) kick() { c.kickOnce.Do(func() { close(c.kickCh) }) }

func (c *canceller) stop() {
	close(c.stopCh)
	<-c.done
}

// cancelLockWaits cancels the queries of appName's sessions that wait for an
// advisory lock.
func cancelLockWaits(db *sql.DB, appName string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = db.ExecContext(ctx, `
		SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'
		  AND pid <> pg_backend_pid()`, appName)
}
