package schema

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	pgxv5 "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/cyberos/mcpd/migrations"
)

// ErrSchemaMismatch reports a database whose schema is not exactly the
// version this build expects, or is dirty.
var ErrSchemaMismatch = errors.New("schema version mismatch")

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
				return nil
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
		st, err = r.status()
		return err
	})
	return st, err
}

// Check reports nil when the database's schema is exactly migrations.Latest
// and not dirty, and an error wrapping ErrSchemaMismatch when it is not. Any
// other error means the database did not answer. q is typically a
// *pgxpool.Pool of mcpd's own login role.
func Check(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	var (
		version int64
		dirty   bool
	)
	err := q.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&version, &dirty)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: no migration applied, want version %d", ErrSchemaMismatch, migrations.Latest)
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable:
		return fmt.Errorf("%w: no schema_migrations table, want version %d", ErrSchemaMismatch, migrations.Latest)
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	case dirty:
		return fmt.Errorf("%w: version %d is dirty, want version %d", ErrSchemaMismatch, version, migrations.Latest)
	case version < 0 || uint64(version) != uint64(migrations.Latest):
		return fmt.Errorf("%w: database at version %d, want version %d", ErrSchemaMismatch, version, migrations.Latest)
	}
	return nil
}

// runner is one open golang-migrate instance.
type runner struct {
	m   *migrate.Migrate
	src source.Driver
	drv database.Driver
	// kick starts cancelling this instance's advisory lock waits.
	kick func()
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
// migration, and with its cause (a *pgconn.PgError) reachable by errors.As.
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
	pgURL, dbPath, appName, err := prepareURLs(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return fmt.Errorf("%s: read migrations: %w", op, err)
	}

	c := startCanceller(ctx, pgURL, appName)
	defer c.stop()

	drv, err := openDriver(pgURL, dbPath)
	if err != nil {
		_ = src.Close()
		return fmt.Errorf("%s: %w", op, ctxErrOr(ctx, fmt.Errorf("open database: %w", shortError(err))))
	}
	m, err := migrate.NewWithInstance("iofs", src, driverScheme, drv)
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

	if err := fn(&runner{m: m, src: src, drv: drv, kick: c.kick}); err != nil {
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

// prepareURLs turns databaseURL into the pgx5:// URL golang-migrate's driver
// knows, and returns it as the postgres:// URL (without golang-migrate's x-
// options) that the driver would connect with, with a unique
// application_name that marks this instance's sessions and a connect_timeout
// from ctx's deadline unless one is set; and the URL's path, by which the
// driver names the database in its lock id.
func prepareURLs(ctx context.Context, databaseURL string) (pgURL, dbPath, appName string, err error) {
	raw, err := driverURL(databaseURL)
	if err != nil {
		return "", "", "", err
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse errors quote the URL, password included.
		return "", "", "", errors.New("database url is not a valid URL")
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", "", fmt.Errorf("application name: %w", err)
	}
	appName = "mcpd-migrate-" + hex.EncodeToString(b[:])
	q := u.Query()
	q.Set("application_name", appName)
	if deadline, ok := ctx.Deadline(); ok && q.Get("connect_timeout") == "" {
		secs := math.Ceil(time.Until(deadline).Seconds())
		q.Set("connect_timeout", strconv.Itoa(max(1, int(secs))))
	}
	u.RawQuery = q.Encode()
	p := migrate.FilterCustomQuery(u)
	p.Scheme = "postgres"
	return p.String(), u.Path, appName, nil
}

// openDriver opens golang-migrate's pgx v5 driver as its pgx5:// Open would,
// with one difference: when the driver fails to start (no answer, a lock
// wait cancelled), Open leaves its sql.DB and connection open; this closes
// them.
func openDriver(pgURL, dbPath string) (database.Driver, error) {
	cfg, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		conns []*pgx.Conn
	)
	db := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(_ context.Context, c *pgx.Conn) error {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return nil
	}))
	drv, err := pgxv5.WithInstance(db, &pgxv5.Config{DatabaseName: dbPath})
	if err != nil {
		_ = db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close(ctx)
		}
		return nil, err
	}
	return drv, nil
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

func startCanceller(ctx context.Context, pgURL, appName string) *canceller {
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
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = conn.Close(cctx)
				cancel()
			}
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			conn = cancelLockWaits(conn, pgURL, appName)
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
// advisory lock, connecting first if conn is nil; it returns the connection
// to reuse (nil after a failure, to reconnect on the next try).
func cancelLockWaits(conn *pgx.Conn, pgURL, appName string) *pgx.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if conn == nil {
		var err error
		conn, err = pgx.Connect(ctx, pgURL)
		if err != nil {
			return nil
		}
	}
	_, err := conn.Exec(ctx, `
		SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'
		  AND pid <> pg_backend_pid()`, appName)
	if err != nil {
		_ = conn.Close(ctx)
		return nil
	}
	return conn
}
