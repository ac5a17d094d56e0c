package pgtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/schema"
)

// InstallCitus is how to install the Citus extension that the Citus tests
// run: Citus's own package, or the build script beside the clone (what
// .ci/run does on a fresh machine).
const InstallCitus = "install Citus 13 for PostgreSQL 15: the package postgresql-15-citus-13.0 " +
	"(https://docs.citusdata.com/en/stable/installation/single_node_debian.html), " +
	"or ../shared/citus/build.sh from the repository's root"

// CitusShardCount is citus.shard_count of the test clusters: small, so that
// distributing a table and cloning a database are fast.
const CitusShardCount = 8

// Citus is a Citus cluster on this machine: a coordinator and two workers,
// three PostgreSQL clusters of pgtest with the extension preloaded, each
// database of NewDB present on the three (the coordinator's holds the
// metadata; the shards are on the workers).
type Citus struct {
	// Coordinator is the node mcpd connects to.
	Coordinator *Cluster
	// Workers hold the shards.
	Workers []*Cluster
	// spares are the nodes that are no longer, or not yet, workers: the
	// standbys of WorkerStandby, the workers FailOverWorker replaced.
	spares []*Cluster

	tmplOnce sync.Once
	tmplErr  error

	drops dropper
}

// dropper drops the databases of finished tests in the background: a
// DROP DATABASE ... WITH (FORCE) on a node of Citus took from 0.01 to
// 11 s (measured; PostgreSQL waits up to 5 s at a time for the
// database's other sessions to end, such as those of its Citus
// maintenance daemon, and refuses while a prepared transaction of
// Citus's two-phase commit is left in it), and a test waiting for three
// of them in its cleanup was most of a conformance case's time. A database is
// dropped on the three nodes side by side, up to maxDrops databases at a
// time; destroy cancels what is left, since the cluster goes with it.
type dropper struct {
	// ctx ends with the cluster: no drop starts after it.
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	// mu orders drop's wg.Go before stopDrops' wg.Wait.
	mu sync.Mutex
	wg sync.WaitGroup
}

// maxDrops bounds the databases being dropped at once.
const maxDrops = 4

// drop drops database name on every node of c, in the background.
func (c *Citus) drop(name string) {
	d := &c.drops
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return
	}
	d.wg.Go(func() {
		select {
		case d.slots <- struct{}{}:
			defer func() { <-d.slots }()
		case <-d.ctx.Done():
			return
		}
		nodes := c.nodes()
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Go(func() { errs[i] = n.dropDB(d.ctx, name) })
		}
		wg.Wait()
		// A database left behind goes with the cluster's directory; the
		// drop only frees the nodes for the tests still running, so a
		// failed one is said and not counted against the run (a CI run
		// had one drop out of 30 s, its tests all passed).
		if err := errors.Join(errs...); err != nil && d.ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "pgtest: left on the Citus cluster until it stops: %v\n", err)
		}
	})
}

// stopDrops cancels the drops not done yet and waits for them.
func (c *Citus) stopDrops() {
	d := &c.drops
	d.mu.Lock()
	d.cancel()
	d.mu.Unlock()
	d.wg.Wait()
}

var (
	citusMu     sync.Mutex
	citusShared *Citus
	citusErr    error
)

// citusInstalled reports whether the Citus extension is installed beside
// the PostgreSQL binaries pgtest runs (their lib directory, or pg_config's
// pkglibdir).
func citusInstalled() (bool, error) {
	bins, err := defaultFinder().find()
	if err != nil {
		return false, err
	}
	pgctl, err := filepath.EvalSymlinks(bins.pgctl)
	if err != nil {
		pgctl = bins.pgctl
	}
	// bin/pg_ctl -> lib/citus.so of the same installation (Debian:
	// /usr/lib/postgresql/15/{bin,lib}).
	dirs := []string{filepath.Join(filepath.Dir(filepath.Dir(pgctl)), "lib")}
	if out, err := exec.Command("pg_config", "--pkglibdir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "citus.so")); err == nil {
			return true, nil
		}
	}
	return false, nil
}

// SharedCitus returns the test binary's Citus cluster, starting it on first
// use; Run stops it. Without Citus installed the test fails under CI=true
// and is skipped otherwise, saying how to install it (Missing).
func SharedCitus(t testing.TB) *Citus {
	t.Helper()
	if !running.Load() {
		t.Fatalf("pgtest: the test binary's TestMain must call pgtest.Run: func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }")
	}
	ok, err := citusInstalled()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if !ok {
		Missing(t, "pgtest: Citus is not installed: "+InstallCitus)
	}
	citusMu.Lock()
	defer citusMu.Unlock()
	if citusShared == nil && citusErr == nil {
		start := time.Now()
		citusShared, citusErr = startCitus()
		if citusErr == nil {
			t.Logf("pgtest: Citus cluster (coordinator on port %d, workers on %d and %d) ready in %v",
				citusShared.Coordinator.port, citusShared.Workers[0].port, citusShared.Workers[1].port,
				time.Since(start).Round(time.Millisecond))
		}
	}
	if citusErr != nil {
		t.Fatalf("pgtest: %v", citusErr)
	}
	return citusShared
}

// NewCitus starts a private Citus cluster, destroyed in t.Cleanup: for a
// test that stops and starts a worker. Without Citus installed it fails
// under CI=true and is skipped otherwise (Missing).
func NewCitus(t testing.TB) *Citus {
	t.Helper()
	ok, err := citusInstalled()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if !ok {
		Missing(t, "pgtest: Citus is not installed: "+InstallCitus)
	}
	start := time.Now()
	c, err := startCitus()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.destroy(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	t.Logf("pgtest: private Citus cluster ready in %v", time.Since(start).Round(time.Millisecond))
	return c
}

func stopCitus() error {
	citusMu.Lock()
	defer citusMu.Unlock()
	c := citusShared
	citusShared, citusErr = nil, nil
	if c == nil {
		return nil
	}
	return c.destroy()
}

func (c *Citus) nodes() []*Cluster { return append([]*Cluster{c.Coordinator}, c.Workers...) }

func (c *Citus) destroy() error {
	c.stopDrops()
	var errs []error
	for _, n := range append(c.nodes(), c.spares...) {
		if n != nil {
			errs = append(errs, n.Destroy())
		}
	}
	return errors.Join(errs...)
}

// citusSettings are the settings of every node.
var citusSettings = map[string]string{
	"shared_preload_libraries":  "citus",
	"max_prepared_transactions": "200",
	"citus.shard_count":         fmt.Sprint(CitusShardCount),
	// A maintenance daemon (a background worker) per database in use on
	// every node: the default 8 leaves few for the databases of tests
	// running side by side and those not dropped yet.
	"max_worker_processes": "32",
	// Loopback between the nodes; without it libpq in the server looks
	// for client certificates in the home of the account that started it.
	"citus.node_conninfo": "sslmode=disable",
}

// CitusInstalled reports whether the Citus extension is installed beside
// the PostgreSQL binaries that pgtest runs.
func CitusInstalled() (bool, error) { return citusInstalled() }

// StartCitus starts a Citus cluster outside a test (the benchmark
// harness): three clusters of StartCluster as opts say, with the Citus
// settings of the test clusters added. Destroy stops it; each node's
// watchdog does too when the calling process dies first. Its databases
// come from CreateDatabase.
func StartCitus(opts ClusterOptions) (*Citus, error) { return startCitusWith(opts) }

// Destroy stops every node of a cluster of StartCitus and removes their
// directories.
func (c *Citus) Destroy() error { return c.destroy() }

// CreateDatabase creates database name on every node with the extension
// and the workers added, not migrated: mcpctl migrate up (schema.Up)
// through the coordinator distributes it.
func (c *Citus) CreateDatabase(ctx context.Context, name string) error {
	for _, n := range c.nodes() {
		maint, err := n.maintPool()
		if err != nil {
			return err
		}
		if _, err := maint.Exec(ctx, n.createDatabaseSQL(name, "template0")); err != nil {
			return fmt.Errorf("create database %s on port %d: %w", name, n.port, err)
		}
	}
	return c.initCitus(ctx, name)
}

func startCitus() (*Citus, error) { return startCitusWith(ClusterOptions{}) }

func startCitusWith(opts ClusterOptions) (c *Citus, err error) {
	c = &Citus{}
	c.drops.ctx, c.drops.cancel = context.WithCancel(context.Background())
	c.drops.slots = make(chan struct{}, maxDrops)
	defer func() {
		if err != nil {
			err = errors.Join(err, c.destroy())
			c = nil
		}
	}()
	settings := maps.Clone(opts.Settings)
	if settings == nil {
		settings = map[string]string{}
	}
	maps.Copy(settings, citusSettings)
	opts.Settings = settings
	for i := range 3 {
		n, err := startCluster(opts)
		if err != nil {
			return c, fmt.Errorf("citus node %d: %w", i, err)
		}
		n.template = "mcpd_citus_template"
		if i == 0 {
			c.Coordinator = n
		} else {
			c.Workers = append(c.Workers, n)
		}
	}
	return c, nil
}

// onEach runs stmt on the maintenance database of every node.
func (c *Citus) onEach(ctx context.Context, stmt string) error {
	for _, n := range c.nodes() {
		maint, err := n.maintPool()
		if err != nil {
			return err
		}
		if _, err := maint.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("port %d: %s: %w", n.port, stmt, err)
		}
	}
	return nil
}

// onEachDB runs stmts in database on every node.
func (c *Citus) onEachDB(ctx context.Context, database string, stmts ...string) error {
	for _, n := range c.nodes() {
		pool, err := pgxpool.New(ctx, n.connString("", "", database))
		if err != nil {
			return err
		}
		for _, stmt := range stmts {
			if _, err := pool.Exec(ctx, stmt); err != nil {
				pool.Close()
				return fmt.Errorf("port %d: %s: %w", n.port, stmt, err)
			}
		}
		pool.Close()
	}
	return nil
}

// NewEmptyDB returns a database on every node with the extension
// created and the workers added, without any migration, for tests of
// migrating onto Citus; App and AppURL are empty.
func (c *Citus) NewEmptyDB(t testing.TB) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("mcpd_citus_%d_%s", dbCounter.Add(1), randomHex(3))
	db, err := c.createDB(ctx, name, "template0")
	c.cleanup(t, db, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := c.initCitus(ctx, name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return db
}

// NewPlainDB returns a database on every node without the citus
// extension and without any migration: what the primary of a plain
// installation holds before it becomes the coordinator (docs/scaling.md,
// "Moving a running installation onto Citus"). AppURL and App connect to
// the coordinator as the app role; AddCitus turns the database into a
// Citus one.
func (c *Citus) NewPlainDB(t testing.TB) *DB {
	t.Helper()
	return c.newAppDB(t, "template0")
}

// AddCitus creates the citus extension in db on every node and adds the
// workers to the coordinator's metadata, as an operator does before
// mcpctl migrate up distributes the tables of a database of NewPlainDB.
func (c *Citus) AddCitus(t testing.TB, db *DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.initCitus(ctx, db.Name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// NewDB returns a fresh database of the cluster at the latest schema
// version, distributed as mcpctl migrate up distributes it: a copy, on each
// node, of that node's template database, made once. Pools connect to the
// coordinator as the superuser and as the app role.
func (c *Citus) NewDB(t testing.TB) *DB {
	t.Helper()
	return c.newAppDB(t, c.Coordinator.template)
}

// newAppDB makes a database on every node from template, with pools of
// the coordinator as the superuser and as the app role, which the
// template databases' making creates on every node.
func (c *Citus) newAppDB(t testing.TB, template string) *DB {
	t.Helper()
	if err := c.ensureTemplate(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("mcpd_citus_%d_%s", dbCounter.Add(1), randomHex(3))
	db, err := c.createDB(ctx, name, template)
	c.cleanup(t, db, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	co := c.Coordinator
	db.AppURL = co.connString(co.appRole, co.appPass, name)
	if db.App, err = newPool(ctx, db.AppURL); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return db
}

// ensureTemplate makes the template databases once.
func (c *Citus) ensureTemplate() error {
	c.tmplOnce.Do(func() { c.tmplErr = c.makeTemplate() })
	return c.tmplErr
}

// cleanup closes db's pools when t ends and queues the database for
// dropping (dropper).
func (c *Citus) cleanup(t testing.TB, db *DB, name string) {
	t.Cleanup(func() {
		if db.App != nil {
			db.App.Close()
		}
		if db.Admin != nil {
			db.Admin.Close()
		}
		c.drop(name)
	})
}

// createDB makes database name on every node from template, and the
// superuser's pool on the coordinator.
func (c *Citus) createDB(ctx context.Context, name, template string) (*DB, error) {
	for _, n := range c.nodes() {
		maint, err := n.maintPool()
		if err != nil {
			return &DB{Name: name}, err
		}
		if _, err := maint.Exec(ctx, n.createDatabaseSQL(name, template)); err != nil {
			return &DB{Name: name}, fmt.Errorf("create database %s on port %d: %w", name, n.port, err)
		}
	}
	db := &DB{Name: name, AdminURL: c.Coordinator.connString("", "", name)}
	var err error
	db.Admin, err = newPool(ctx, db.AdminURL)
	return db, err
}

// initCitus creates the extension in database on every node and adds the
// workers to the coordinator's metadata.
func (c *Citus) initCitus(ctx context.Context, database string) error {
	if err := c.onEachDB(ctx, database, `CREATE EXTENSION IF NOT EXISTS citus`); err != nil {
		return err
	}
	stmts := []string{fmt.Sprintf(`SELECT citus_set_coordinator_host('127.0.0.1', %d)`, c.Coordinator.port)}
	for _, w := range c.Workers {
		stmts = append(stmts, fmt.Sprintf(`SELECT citus_add_node('127.0.0.1', %d)`, w.port))
	}
	pool, err := pgxpool.New(ctx, c.Coordinator.connString("", "", database))
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, stmt := range stmts {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// makeTemplate makes the template database on every node: the extension,
// the workers, the app login role on each node (Citus connects to the
// workers as the session's role), then mcpd's migrations through the
// coordinator, which distribute the tables.
func (c *Citus) makeTemplate() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	co := c.Coordinator
	tmpl := co.template
	for _, n := range c.nodes() {
		maint, err := n.maintPool()
		if err != nil {
			return err
		}
		if _, err := maint.Exec(ctx, `CREATE DATABASE `+ident(tmpl)+` TEMPLATE template0`); err != nil {
			return fmt.Errorf("create template database on port %d: %w", n.port, err)
		}
	}
	if err := c.initCitus(ctx, tmpl); err != nil {
		return err
	}
	if err := schema.Up(ctx, co.connString("", "", tmpl)); err != nil {
		return fmt.Errorf("migrate the template database: %w", err)
	}
	create := `CREATE ROLE ` + ident(co.appRole) + ` LOGIN INHERIT NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION`
	if co.appPass != "" {
		create += ` PASSWORD ` + literal(co.appPass)
	}
	// Through the coordinator's template database: Citus propagates the
	// role and the grant to the workers.
	if err := c.onCoordinatorDB(ctx, tmpl, create, `GRANT cyberos_app TO `+ident(co.appRole)); err != nil {
		return err
	}
	// Templates no one connects to: CREATE DATABASE refuses to copy a
	// database that has sessions (Citus's maintenance daemon keeps one).
	if err := c.onEach(ctx, `ALTER DATABASE `+ident(tmpl)+` IS_TEMPLATE true ALLOW_CONNECTIONS false`); err != nil {
		return err
	}
	// The sessions already there (the coordinator's connections to the
	// workers, the maintenance daemon) end; none comes again.
	return c.onEach(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = `+literal(tmpl)+` AND pid <> pg_backend_pid()`)
}

func (c *Citus) onCoordinatorDB(ctx context.Context, database string, stmts ...string) error {
	pool, err := pgxpool.New(ctx, c.Coordinator.connString("", "", database))
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, stmt := range stmts {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// TenantOnEachWorker returns a tenant id for each of c.Workers, in their
// order: one whose shard of the distributed tables (migrated into db) that
// worker holds.
func (c *Citus) TenantOnEachWorker(t testing.TB, db *DB) []uuid.UUID {
	t.Helper()
	onPort := map[int]uuid.UUID{}
	for len(onPort) < len(c.Workers) {
		tenant := uuid.New()
		if port := workerPort(t, db, tenant); onPort[port] == uuid.Nil {
			onPort[port] = tenant
		}
	}
	out := make([]uuid.UUID, len(c.Workers))
	for i, w := range c.Workers {
		out[i] = onPort[w.Port()]
	}
	return out
}

// TenantsOnWorker returns n tenant ids whose shards of the distributed
// tables (migrated into db) c.Workers[worker] holds.
func (c *Citus) TenantsOnWorker(t testing.TB, db *DB, worker, n int) []uuid.UUID {
	t.Helper()
	var out []uuid.UUID
	for len(out) < n {
		if tenant := uuid.New(); workerPort(t, db, tenant) == c.Workers[worker].Port() {
			out = append(out, tenant)
		}
	}
	return out
}

// workerPort is the port of the node that holds tenant's shard in db.
func workerPort(t testing.TB, db *DB, tenant uuid.UUID) int {
	t.Helper()
	var port int
	if err := db.Admin.QueryRow(context.Background(), `SELECT p.nodeport FROM pg_dist_shard_placement p
		WHERE p.shardid = get_shard_id_for_distribution_column('mcp_servers', $1::uuid)`, tenant).Scan(&port); err != nil {
		t.Fatalf("pgtest: place a tenant: %v", err)
	}
	return port
}
