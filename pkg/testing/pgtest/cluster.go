package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Cluster is a PostgreSQL server that tests make databases on: the shared
// one of the test binary (Shared), or a private one (NewCluster) for tests
// that stop and start the server. StartCluster starts one outside a test
// (the benchmark harness).
type Cluster struct {
	// Fixed after start.
	opts       ClusterOptions
	external   bool
	shared     bool
	port       int
	root       string // temporary directory: data, socket, logs
	dataDir    string
	sockDir    string
	bins       binaries
	acct       account
	conn       string // superuser connection string (external server only)
	template   string
	appRole    string
	appPass    string
	serverNum  int // server_version_num
	superuser  string
	watchdog   *exec.Cmd
	watchdogIn *os.File
	settings   []string // extra -c name=value of ClusterOptions

	mu      sync.Mutex
	running bool
	maint   *pgxpool.Pool // superuser pool on the maintenance database

	tmplOnce sync.Once
	tmplErr  error

	rbOnce  sync.Once // the rollback database of Tx
	rbErr   error
	rbName  string
	rbPools [2]*pgxpool.Pool // superuser, app role
}

// startTimeout bounds initdb and pg_ctl start and stop.
const startTimeout = 2 * time.Minute

// ClusterOptions configures a cluster that pgtest starts.
type ClusterOptions struct {
	// Durable keeps the server's default durability (fsync,
	// synchronous_commit and full_page_writes on), for figures. Tests run
	// with all three off: faster, and a crash loses nothing they need.
	Durable bool
	// BaseDir is where the cluster's directory is made; it must be on a
	// real disk for durable figures. Empty: /dev/shm when it is writable
	// (the temporary directory for a durable cluster).
	BaseDir string
	// Files are written into the cluster's directory before the server
	// starts, readable by the server's account only (mode 0600): keys and
	// certificates for ssl, say.
	Files map[string][]byte
	// Settings are extra postgresql.conf settings (name to value), given
	// to the server as -c flags; "{dir}" in a value is the directory the
	// Files are in.
	Settings map[string]string
}

// StartCluster makes and starts a cluster as opts say, outside a test.
// Destroy stops it and removes its directory; a watchdog process does that
// too when the calling process dies first.
func StartCluster(opts ClusterOptions) (*Cluster, error) {
	return startCluster(opts)
}

// NewCluster starts a private PostgreSQL cluster (its own initdb, port and
// data directory), stopped and removed in t.Cleanup. It starts one even
// when MCPD_TEST_DATABASE_URL is set.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	return NewClusterWith(t, ClusterOptions{})
}

// NewClusterWith is NewCluster with options: files in its directory and
// settings of its own (ssl=on with a test's certificate, say). The URLs of
// its databases keep sslmode=disable; a test that wants TLS edits them.
func NewClusterWith(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	start := time.Now()
	c, err := startCluster(o)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Destroy(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	t.Logf("pgtest: private PostgreSQL cluster on 127.0.0.1:%d ready in %v", c.port, time.Since(start).Round(time.Millisecond))
	return c
}

// Port is the TCP port the cluster listens on (on 127.0.0.1 for a cluster
// that pgtest started).
func (c *Cluster) Port() int { return c.port }

// URL is a connection URL for database as user (trust authentication on a
// cluster pgtest started; the superuser when user is empty).
func (c *Cluster) URL(user, database string) string { return c.connString(user, "", database) }

// Dir is the directory of a cluster pgtest started: the data directory
// (data), the socket directory and the server's log (postgres.log).
func (c *Cluster) Dir() string { return c.root }

// BinDir is the directory of the server programs of a cluster pgtest
// started (initdb, pg_ctl, and pgbench when it is installed).
func (c *Cluster) BinDir() string { return filepath.Dir(c.bins.pgctl) }

// PID is the postmaster's process id (0 when it cannot be read).
func (c *Cluster) PID() int {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// ServerVersion is what the server program says of its version
// (postgres --version), or "" when it cannot be run.
func (c *Cluster) ServerVersion() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.run(ctx, filepath.Join(c.BinDir(), "postgres"), "--version")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// FSType names the file system of the cluster's directory (ext4, xfs,
// tmpfs...), from statfs's magic number.
func (c *Cluster) FSType() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.root, &st); err != nil {
		return "unknown"
	}
	switch uint64(st.Type) {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs"
	case 0x794C7630:
		return "overlayfs"
	case 0x2FC12FC1:
		return "zfs"
	}
	return fmt.Sprintf("0x%x", uint64(st.Type))
}

// Stop stops the server (pg_ctl stop -m fast: sessions are ended, what was
// committed is kept), keeping its data directory and port for Start. Only a
// private cluster can be stopped.
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	c.stopServer(t, "fast", "stopped")
}

// stopServer stops a private cluster's server with pg_ctl stop -m mode;
// verb says what is refused to a shared or external one.
func (c *Cluster) stopServer(t testing.TB, mode, verb string) {
	t.Helper()
	if c.external || c.shared {
		t.Fatalf("pgtest: only a private cluster (NewCluster) can be %s", verb)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return
	}
	if c.maint != nil {
		c.maint.Close()
		c.maint = nil
	}
	if err := c.pgctlStop(mode); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	c.running = false
}

// Start starts a stopped cluster again, on the same port and data directory.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	if c.external || c.shared {
		t.Fatalf("pgtest: only a private cluster (NewCluster) can be started")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return
	}
	if err := c.pgctlStart(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := c.openMaint(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	c.running = true
}

// startCluster makes and starts a cluster in a new temporary directory.
func startCluster(opts ClusterOptions) (c *Cluster, err error) {
	bins, err := defaultFinder().find()
	if err != nil {
		return nil, err
	}
	acct, err := currentAccount()
	if err != nil {
		return nil, err
	}
	base := opts.BaseDir
	if base == "" {
		base = tempBase(opts.Durable)
	}
	root, err := os.MkdirTemp(base, "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	c = &Cluster{
		opts:      opts,
		root:      root,
		dataDir:   filepath.Join(root, "data"),
		sockDir:   filepath.Join(root, "sock"),
		bins:      bins,
		acct:      acct,
		template:  "mcpd_template",
		appRole:   "mcpd_test_app",
		superuser: "postgres",
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Destroy())
			c = nil
		}
	}()
	if err := os.Mkdir(c.sockDir, 0o700); err != nil {
		return c, err
	}
	for _, dir := range []string{root, c.sockDir} {
		if err := acct.chown(dir); err != nil {
			return c, fmt.Errorf("give %s to the server's user: %w", dir, err)
		}
	}
	if err := c.startWatchdog(); err != nil {
		return c, err
	}
	if err := c.applyOptions(opts); err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if out, err := c.run(ctx, bins.initdb, "-D", c.dataDir, "-A", "trust", "-U", c.superuser,
		"--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		return c, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// A free port can be taken by another process before the server binds
	// it: try a few.
	for attempt := 0; ; attempt++ {
		if c.port, err = FreePort(); err != nil {
			return c, err
		}
		err = c.pgctlStart()
		if err == nil {
			break
		}
		if attempt == 4 || !strings.Contains(err.Error(), "already in use") {
			return c, err
		}
	}
	c.running = true
	if err := c.openMaint(); err != nil {
		return c, err
	}
	return c, c.readServerVersion()
}

// externalCluster uses the server of the superuser connection string conn.
// Roles and the template get names of their own per test binary, since
// several binaries (packages) may test on that server at the same time.
func externalCluster(conn string) (*Cluster, error) {
	cfg, err := pgxpool.ParseConfig(conn)
	if err != nil {
		return nil, fmt.Errorf("MCPD_TEST_DATABASE_URL: %w", err)
	}
	suffix := randomHex(4)
	c := &Cluster{
		external:  true,
		conn:      conn,
		port:      int(cfg.ConnConfig.Port),
		template:  "mcpd_template_" + suffix,
		appRole:   "mcpd_test_app_" + suffix,
		appPass:   randomHex(16),
		superuser: cfg.ConnConfig.User,
		running:   true,
	}
	if err := c.openMaint(); err != nil {
		return nil, err
	}
	if err := c.readServerVersion(); err != nil {
		c.maint.Close()
		return nil, fmt.Errorf("MCPD_TEST_DATABASE_URL: %w", err)
	}
	return c, nil
}

// Destroy stops the server at once and removes its directory (a cluster
// pgtest started), or removes what this binary made on an external server.
func (c *Cluster) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := []error{c.closeRollbackDB()}
	if c.external {
		errs = append(errs, c.dropExternal())
	}
	if c.maint != nil {
		c.maint.Close()
		c.maint = nil
	}
	if c.external {
		return errors.Join(errs...)
	}
	if c.running {
		errs = append(errs, c.pgctlStop("immediate"))
		c.running = false
	}
	if c.root != "" {
		if err := os.RemoveAll(c.root); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.root, err))
		}
	}
	if c.watchdog != nil {
		// "done": the watchdog leaves without doing anything.
		_, _ = c.watchdogIn.WriteString("done\n")
		_ = c.watchdogIn.Close()
		_ = c.watchdog.Wait()
		c.watchdog = nil
	}
	return errors.Join(errs...)
}

// dropExternal drops the template and the app role this binary made on an
// external server.
func (c *Cluster) dropExternal() error {
	if c.maint == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var exists bool
	if err := c.maint.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`,
		c.template).Scan(&exists); err != nil {
		return fmt.Errorf("drop template: %w", err)
	}
	if exists {
		if _, err := c.maint.Exec(ctx, `ALTER DATABASE `+ident(c.template)+` IS_TEMPLATE false`); err != nil {
			return fmt.Errorf("drop template: %w", err)
		}
		if _, err := c.maint.Exec(ctx, c.dropDatabaseSQL(c.template)); err != nil {
			return fmt.Errorf("drop template: %w", err)
		}
	}
	if _, err := c.maint.Exec(ctx, `DROP ROLE IF EXISTS `+ident(c.appRole)); err != nil {
		return fmt.Errorf("drop role %s: %w", c.appRole, err)
	}
	return nil
}

// startWatchdog starts a shell that waits on a pipe from this process. When
// the process ends without saying "done" (a panic, a timeout, a kill), the
// pipe closes and the shell stops the server and removes the directory. It
// has a process group of its own, so that a Ctrl-C aimed at the test does
// not end it first.
func (c *Cluster) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	// A server a test froze (Freeze) and never thawed is resumed first,
	// so that it can stop.
	const script = `root=$1; data=$2; shift 2
read -r line
[ "$line" = done ] && exit 0
pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null)
if [ -n "$pid" ]; then
	kill -CONT "$pid" 2>/dev/null
	pkill -CONT -P "$pid" 2>/dev/null
fi
"$@" >/dev/null 2>&1
rm -rf -- "$root"`
	args := append([]string{"-c", script, "pgtest-watchdog", c.root, c.dataDir}, c.stopArgs()...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Stdin = r
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		return fmt.Errorf("watchdog: %w", err)
	}
	c.watchdog, c.watchdogIn = cmd, w
	return nil
}

// stopFlags are pg_ctl's arguments that stop the server in mode: immediate
// (at once, as a crash: for a cluster being thrown away) or fast (sessions
// end, the last commits are written: for a restart).
func (c *Cluster) stopFlags(mode string) []string {
	return []string{"-D", c.dataDir, "-m", mode, "-w", "-t", "60", "stop"}
}

// stopArgs is the whole command line that stops the server at once, as the
// cluster's account.
func (c *Cluster) stopArgs() []string {
	return c.acct.command(c.bins.pgctl, c.stopFlags("immediate")...)
}

func (c *Cluster) pgctlStop(mode string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if out, err := c.run(ctx, c.bins.pgctl, c.stopFlags(mode)...); err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

func (c *Cluster) pgctlStart() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	logFile := filepath.Join(c.root, "postgres.log")
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories='%s' -c max_connections=300",
		c.port, c.sockDir)
	if !c.opts.Durable {
		opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	for _, kv := range c.settings {
		opts += " -c " + kv
	}
	out, err := c.run(ctx, c.bins.pgctl, "-D", c.dataDir, "-l", logFile, "-o", opts, "-w", "-t", "60", "start")
	if err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("pg_ctl start on port %d: %w\n%s\n%s", c.port, err, out, tail(string(log), 2000))
	}
	return nil
}

// applyOptions writes o's files into the cluster's directory, given to the
// server's account, and keeps its settings for pgctlStart.
func (c *Cluster) applyOptions(o ClusterOptions) error {
	for name, b := range o.Files {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return fmt.Errorf("cluster file %q: want a plain file name", name)
		}
		path := filepath.Join(c.root, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return fmt.Errorf("cluster file: %w", err)
		}
		if err := c.acct.chown(path); err != nil {
			return fmt.Errorf("give %s to the server's user: %w", path, err)
		}
	}
	names := make([]string, 0, len(o.Settings))
	for name := range o.Settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		value := strings.ReplaceAll(o.Settings[name], "{dir}", c.root)
		if strings.ContainsAny(name, " '=\"") || strings.ContainsAny(value, "'\\") {
			return fmt.Errorf("cluster setting %s: quotes and backslashes are not supported", name)
		}
		c.settings = append(c.settings, fmt.Sprintf("%s='%s'", name, value))
	}
	return nil
}

// run runs a server program as the cluster's account, in its directory (a
// root test's working directory may be closed to nobody), with PG*
// variables removed from the environment. The program's output goes to a
// file rather than a pipe: pg_ctl leaves the server running with whatever it
// inherited.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	argv := c.acct.command(name, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = c.root
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := os.CreateTemp(c.root, "cmd-*.log")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(out.Name()) }()
	defer func() { _ = out.Close() }()
	cmd.Stdout, cmd.Stderr = out, out
	runErr := cmd.Run()
	text, _ := os.ReadFile(out.Name())
	return string(text), runErr
}

func (c *Cluster) openMaint() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := c.conn
	if !c.external {
		conn = c.localURL(c.superuser, "", "postgres")
	}
	cfg, err := pgxpool.ParseConfig(conn)
	if err != nil {
		return fmt.Errorf("maintenance pool: %w", err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("maintenance pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("connect to the server: %w", err)
	}
	c.maint = pool
	return nil
}

func (c *Cluster) readServerVersion() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var isSuper bool
	err := c.maint.QueryRow(ctx, `SELECT current_setting('server_version_num')::int,
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)`).Scan(&c.serverNum, &isSuper)
	if err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	if !isSuper {
		return errors.New("the role must be a superuser")
	}
	return nil
}

// localURL is a URL for a cluster pgtest started (trust authentication).
func (c *Cluster) localURL(user, password, database string) string {
	u := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", user, c.port, database)
	if password != "" {
		u = fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", user, password, c.port, database)
	}
	return u
}

// connString is a connection string for database as user (the superuser
// when user is empty).
func (c *Cluster) connString(user, password, database string) string {
	if !c.external {
		if user == "" {
			user = c.superuser
		}
		return c.localURL(user, password, database)
	}
	s := withDatabase(c.conn, database)
	if user != "" {
		s = withUser(s, user, password)
	}
	return s
}

// tempBase is where clusters live: /dev/shm when it is there, since cloning
// a template copies a few hundred files and that is several times faster in
// memory than on a disk; else, and for a durable cluster, the temporary
// directory.
func tempBase(durable bool) string {
	const shm = "/dev/shm"
	if durable {
		return os.TempDir()
	}
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() && fi.Mode()&0o002 != 0 {
		if f, err := os.CreateTemp(shm, ".pgtest-probe-*"); err == nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			return shm
		}
	}
	return os.TempDir()
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
