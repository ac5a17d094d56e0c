package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Missing ends a test that needs a program this machine lacks: it fails
// under CI=true, where every test must run, and is skipped otherwise; msg
// says what is missing and how to install it.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// InstallPgBouncer is how to install the pooler that StartPgBouncer runs.
const InstallPgBouncer = "apt-get install pgbouncer"

// PgBouncer is a pgbouncer in transaction pooling mode in front of a
// cluster, on a loopback port of its own: each transaction of a client may
// run on a different server connection, as behind a production pooler.
type PgBouncer struct {
	port    int
	root    string
	cmd     *exec.Cmd
	stdin   *os.File
	logFile string
}

// PgBouncerOptions tune StartPgBouncer.
type PgBouncerOptions struct {
	// PoolSize is the number of server connections per database and user
	// (default 3): fewer than a client pool has, so that transactions of
	// one client connection move between server connections.
	PoolSize int
}

// StartPgBouncer starts pgbouncer (Debian's /usr/sbin/pgbouncer or one on
// PATH) in transaction pooling mode in front of c, stopped in t.Cleanup.
// Every database of c is reachable through it, as the superuser and as the
// app role. Without pgbouncer the test fails under CI=true and is skipped
// otherwise, saying how to install it.
func (c *Cluster) StartPgBouncer(t testing.TB, opts PgBouncerOptions) *PgBouncer {
	t.Helper()
	return c.startPgBouncerAfter(t, opts, c.ensureTemplate)
}

// StartPgBouncer starts pgbouncer in front of c's coordinator, as
// Cluster.StartPgBouncer does in front of a cluster.
func (c *Citus) StartPgBouncer(t testing.TB, opts PgBouncerOptions) *PgBouncer {
	t.Helper()
	return c.Coordinator.startPgBouncerAfter(t, opts, c.ensureTemplate)
}

// startPgBouncerAfter starts pgbouncer in front of c once ensureTemplate,
// which makes the app role, has run.
func (c *Cluster) startPgBouncerAfter(t testing.TB, opts PgBouncerOptions, ensureTemplate func() error) *PgBouncer {
	t.Helper()
	bin := findPgBouncer()
	if bin == "" {
		Missing(t, "pgbouncer not found (on PATH or /usr/sbin/pgbouncer): install it with `"+InstallPgBouncer+"` to run this test")
	}
	if err := ensureTemplate(); err != nil { // makes the app role
		t.Fatalf("pgtest: %v", err)
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = 3
	}
	start := time.Now()
	b, err := c.startPgBouncer(bin, opts)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	t.Logf("pgtest: pgbouncer (transaction mode, pool size %d) on 127.0.0.1:%d ready in %v",
		opts.PoolSize, b.port, time.Since(start).Round(time.Millisecond))
	return b
}

// Port is the loopback port pgbouncer listens on.
func (b *PgBouncer) Port() int { return b.port }

// URL returns conn, a URL of the cluster behind b (such as DB.AppURL or
// DB.AdminURL), going through b instead.
func (b *PgBouncer) URL(conn string) string {
	u, ok := parseURL(conn)
	if !ok {
		panic("pgtest: PgBouncer.URL takes a postgres:// URL, not " + conn)
	}
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	return u.String()
}

// Log is what pgbouncer has logged so far.
func (b *PgBouncer) Log() string {
	text, _ := os.ReadFile(b.logFile)
	return string(text)
}

func findPgBouncer() string {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	if isExecutable("/usr/sbin/pgbouncer") {
		return "/usr/sbin/pgbouncer"
	}
	return ""
}

// serverAddr is the host and port pgbouncer connects to, and the password
// of each role it logs in as.
func (c *Cluster) serverAddr() (host string, port int, users map[string]string, err error) {
	users = map[string]string{c.superuser: "", c.appRole: c.appPass}
	if !c.external {
		return "127.0.0.1", c.port, users, nil
	}
	cfg, err := pgx.ParseConfig(c.conn)
	if err != nil {
		return "", 0, nil, err
	}
	users[c.superuser] = cfg.Password
	return cfg.Host, int(cfg.Port), users, nil
}

func (c *Cluster) startPgBouncer(bin string, opts PgBouncerOptions) (b *PgBouncer, err error) {
	acct, err := currentAccount() // pgbouncer refuses root too
	if err != nil {
		return nil, err
	}
	host, serverPort, users, err := c.serverAddr()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp(tempBase(false), "pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(root)
		}
	}()
	if err := acct.chown(root); err != nil {
		return nil, err
	}
	var auth strings.Builder
	for user, pass := range users {
		fmt.Fprintf(&auth, "%q %q\n", user, pass)
	}
	authFile := filepath.Join(root, "users.txt")
	if err := os.WriteFile(authFile, []byte(auth.String()), 0o600); err != nil {
		return nil, err
	}
	if err := acct.chown(authFile); err != nil {
		return nil, err
	}
	// A free port can be taken before pgbouncer binds it: try a few.
	for attempt := 0; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		b = &PgBouncer{port: port, root: root, logFile: filepath.Join(root, fmt.Sprintf("pgbouncer-%d.log", attempt))}
		conf := filepath.Join(root, fmt.Sprintf("pgbouncer-%d.ini", attempt))
		text := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 1000
query_wait_timeout = 20
ignore_startup_parameters = extra_float_digits
logfile = %s
`, host, serverPort, port, authFile, opts.PoolSize, b.logFile)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		err = b.start(acct, bin, conf, c.superuser)
		if err == nil {
			return b, nil
		}
		_ = b.kill()
		if attempt == 4 || !strings.Contains(b.Log(), "in use") {
			return nil, fmt.Errorf("start pgbouncer: %w\n%s", err, tail(b.Log(), 2000))
		}
	}
}

// start runs pgbouncer under a shell that stops it when its standard input
// closes: at stop, or when the test binary dies without cleaning up.
func (b *PgBouncer) start(acct account, bin, conf, superuser string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	const script = `"$@" </dev/null >/dev/null 2>&1 &
pid=$!
read -r line
kill -TERM "$pid" 2>/dev/null
wait "$pid"
exit 0`
	args := append([]string{"-c", script, "pgtest-pgbouncer"}, acct.command(bin, conf)...)
	b.cmd = exec.Command("/bin/sh", args...)
	b.cmd.Stdin = r
	b.cmd.Dir = "/"
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = b.cmd.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		b.cmd = nil
		return err
	}
	b.stdin = w
	return b.waitReady(superuser)
}

// waitReady waits until pgbouncer answers a query through to the server.
func (b *PgBouncer) waitReady(superuser string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		if strings.Contains(b.Log(), "in use") || strings.Contains(b.Log(), "FATAL") {
			return errors.New("pgbouncer did not start")
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		last = b.ping(cctx, superuser)
		ccancel()
		if last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pgbouncer on port %d not ready: %w", b.port, last)
}

func (b *PgBouncer) ping(ctx context.Context, superuser string) error {
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable&default_query_exec_mode=simple_protocol",
		url.User(superuser), b.port))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// stop ends pgbouncer and removes its directory.
func (b *PgBouncer) stop() error {
	err := b.kill()
	if b.root != "" {
		err = errors.Join(err, os.RemoveAll(b.root))
		b.root = ""
	}
	return err
}

// kill ends pgbouncer.
func (b *PgBouncer) kill() error {
	var errs []error
	if b.stdin != nil {
		_ = b.stdin.Close()
		b.stdin = nil
	}
	if b.cmd != nil {
		done := make(chan error, 1)
		go func() { done <- b.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, fmt.Errorf("stop pgbouncer: %w", err))
			}
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			errs = append(errs, fmt.Errorf("stop pgbouncer: %w", <-done))
		}
		b.cmd = nil
	}
	return errors.Join(errs...)
}
