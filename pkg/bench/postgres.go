package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Postgres is a PostgreSQL cluster that the harness started: initdb into a
// temporary directory on disk, a random loopback port, trust authentication,
// and the server's default durability (fsync, synchronous_commit and
// full_page_writes on). pkg/pgtest's clusters turn all three off for speed,
// which is right for tests and wrong for figures.
type Postgres struct {
	// BinDir holds the server programs (initdb, pg_ctl, pgbench).
	BinDir string
	// Version is the server's version as initdb reports it.
	Version string
	// FSType is the file system of the data directory (ext4, xfs, tmpfs...).
	FSType string

	port       int
	root       string
	dataDir    string
	sockDir    string
	prefix     []string // runs a program as the server's account, or nil
	uid, gid   int
	running    bool
	watchdogIn *os.File
	watchdog   *exec.Cmd
}

// PostgresOptions configures StartPostgres.
type PostgresOptions struct {
	// BaseDir is where the cluster's directory is made; empty: the
	// temporary directory. It must be on a real disk for durable figures.
	BaseDir string
	// Settings are extra -c name=value settings of the server.
	Settings []string
}

// StartPostgres makes and starts a cluster. Stop stops it and removes its
// directory; a watchdog process does that too when the harness dies.
func StartPostgres(ctx context.Context, opts PostgresOptions) (p *Postgres, err error) {
	binDir, err := findPostgresBin()
	if err != nil {
		return nil, err
	}
	p = &Postgres{BinDir: binDir, uid: -1, gid: -1}
	if err := p.setAccount(); err != nil {
		return nil, err
	}
	base := opts.BaseDir
	if base == "" {
		base = os.TempDir()
	}
	if p.root, err = os.MkdirTemp(base, "mcpd-bench-pg-"); err != nil {
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Stop())
			p = nil
		}
	}()
	p.dataDir = filepath.Join(p.root, "data")
	p.sockDir = filepath.Join(p.root, "sock")
	p.FSType = fsType(p.root)
	if err := os.Mkdir(p.sockDir, 0o700); err != nil {
		return p, err
	}
	for _, dir := range []string{p.root, p.sockDir} {
		if err := p.chown(dir); err != nil {
			return p, fmt.Errorf("give %s to the server's user: %w", dir, err)
		}
	}
	if err := p.startWatchdog(); err != nil {
		return p, err
	}
	// --no-sync only skips initdb's own final fsync of the new cluster; the
	// running server keeps fsync on.
	out, err := p.run(ctx, "initdb", "-D", p.dataDir, "-A", "trust", "-U", "postgres", "--no-sync",
		"-E", "UTF8", "--locale=C")
	if err != nil {
		return p, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if v, err := p.run(ctx, "postgres", "--version"); err == nil {
		p.Version = strings.TrimSpace(v)
	}
	for attempt := 0; ; attempt++ {
		if p.port, err = FreePort(); err != nil {
			return p, err
		}
		if err = p.start(ctx, opts.Settings); err == nil {
			break
		}
		if attempt == 4 || !strings.Contains(err.Error(), "already in use") {
			return p, err
		}
	}
	p.running = true
	return p, nil
}

func (p *Postgres) start(ctx context.Context, settings []string) error {
	logFile := filepath.Join(p.root, "postgres.log")
	o := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories='%s' -c max_connections=300 -c log_autovacuum_min_duration=0 -c log_checkpoints=on",
		p.port, p.sockDir)
	for _, s := range settings {
		o += " -c " + s
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := p.run(ctx, "pg_ctl", "-D", p.dataDir, "-l", logFile, "-o", o, "-w", "-t", "60", "start")
	if err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("pg_ctl start on port %d: %w\n%s\n%s", p.port, err, out, lastBytes(string(log), 2000))
	}
	return nil
}

// Port is the server's TCP port on 127.0.0.1.
func (p *Postgres) Port() int { return p.port }

// URL is a connection URL for database as user (trust authentication).
func (p *Postgres) URL(user, database string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", user, p.port, database)
}

// PID is the postmaster's process id (0 when it cannot be read).
func (p *Postgres) PID() int {
	b, err := os.ReadFile(filepath.Join(p.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// Dir is the cluster's directory.
func (p *Postgres) Dir() string { return p.root }

// Stop stops the server at once and removes its directory.
func (p *Postgres) Stop() error {
	var errs []error
	if p.running {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := p.run(ctx, "pg_ctl", "-D", p.dataDir, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
			errs = append(errs, fmt.Errorf("pg_ctl stop: %w\n%s", err, out))
		}
		p.running = false
	}
	if p.root != "" {
		if err := os.RemoveAll(p.root); err != nil {
			errs = append(errs, err)
		}
		p.root = ""
	}
	if p.watchdog != nil {
		_, _ = p.watchdogIn.WriteString("done\n")
		_ = p.watchdogIn.Close()
		_ = p.watchdog.Wait()
		p.watchdog = nil
	}
	return errors.Join(errs...)
}

// run runs a server program as the server's account in the cluster's
// directory; its output goes to a file, since pg_ctl leaves the server
// holding whatever it inherited.
func (p *Postgres) run(ctx context.Context, name string, args ...string) (string, error) {
	argv := append(append(append([]string(nil), p.prefix...), filepath.Join(p.BinDir, name)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = p.root
	cmd.Env = cleanEnv()
	out, err := os.CreateTemp(p.root, "cmd-*.log")
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

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// setAccount arranges for the server programs to run as nobody when the
// harness runs as root, which PostgreSQL refuses.
func (p *Postgres) setAccount() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return errors.New("running as root, and PostgreSQL refuses root: no user nobody to run it as")
	}
	if p.uid, err = strconv.Atoi(u.Uid); err != nil {
		return err
	}
	if p.gid, err = strconv.Atoi(u.Gid); err != nil {
		return err
	}
	if sp, err := exec.LookPath("setpriv"); err == nil {
		p.prefix = []string{sp, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", "--"}
	} else if ru, err := exec.LookPath("runuser"); err == nil {
		p.prefix = []string{ru, "-u", "nobody", "--"}
	} else {
		return errors.New("running as root: neither setpriv nor runuser found to run PostgreSQL as nobody")
	}
	return nil
}

func (p *Postgres) chown(path string) error {
	if p.prefix == nil {
		return nil
	}
	return os.Chown(path, p.uid, p.gid)
}

// startWatchdog starts a shell that stops the server and removes its
// directory when this process ends without saying "done" (a panic, a kill).
func (p *Postgres) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	const script = `root=$1; shift
read -r line
[ "$line" = done ] && exit 0
"$@" >/dev/null 2>&1
rm -rf -- "$root"`
	stop := append(append([]string(nil), p.prefix...), filepath.Join(p.BinDir, "pg_ctl"),
		"-D", p.dataDir, "-m", "immediate", "-w", "-t", "60", "stop")
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "mcpd-bench-watchdog", p.root}, stop...)...)
	cmd.Stdin = r
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		return fmt.Errorf("watchdog: %w", err)
	}
	p.watchdog, p.watchdogIn = cmd, w
	return nil
}

// errNoPostgres is what a machine without the server programs gets.
var errNoPostgres = errors.New("PostgreSQL server programs (initdb, pg_ctl, pgbench) not found: " +
	"install them with `apt-get install postgresql` (Debian/Ubuntu)")

// findPostgresBin finds the directory of initdb and pg_ctl: on PATH, else
// the newest /usr/lib/postgresql/*/bin.
func findPostgresBin() (string, error) {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(initdb)
		if isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		return majorOf(dirs[i]) > majorOf(dirs[j])
	})
	for _, dir := range dirs {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	return "", errNoPostgres
}

// majorOf is the version of a /usr/lib/postgresql/VERSION/bin directory.
func majorOf(binDir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	if err != nil {
		return -1
	}
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// FindPgbench finds pgbench: next to the server programs, else on PATH.
func (p *Postgres) FindPgbench() (string, error) {
	if path := filepath.Join(p.BinDir, "pgbench"); isExecutable(path) {
		return path, nil
	}
	return exec.LookPath("pgbench")
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

// fsType names the file system holding path, from statfs's magic number.
func fsType(path string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
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

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
