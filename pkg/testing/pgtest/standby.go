package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StartStandby makes a streaming standby of c, which must be a private
// cluster (NewCluster): pg_basebackup -R from c into a new directory,
// started on a loopback port of its own, with the same databases and roles.
// With sync, c commits only what the standby has received
// (synchronous_standby_names = '*', and synchronous_commit = on for every
// role, over the test clusters' off), so that no acknowledged write is lost
// when the standby takes over. The standby is stopped and removed in
// t.Cleanup; Promote makes it a primary.
func (c *Cluster) StartStandby(t testing.TB, sync bool) *Cluster {
	t.Helper()
	if c.external || c.shared {
		t.Fatalf("pgtest: only a private cluster (NewCluster) can have a standby")
	}
	if err := c.ensureTemplate(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	start := time.Now()
	s, err := c.startStandby(nil)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Destroy(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	if sync {
		if err := c.syncTo(); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	t.Logf("pgtest: standby of port %d on 127.0.0.1:%d (synchronous: %v) ready in %v",
		c.port, s.port, sync, time.Since(start).Round(time.Millisecond))
	return s
}

// startStandby makes and starts the standby, with settings (-c name=value)
// on top of the defaults.
func (c *Cluster) startStandby(settings []string) (s *Cluster, err error) {
	root, err := os.MkdirTemp(tempBase(false), "pgtest-standby-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	s = &Cluster{
		root:      root,
		dataDir:   filepath.Join(root, "data"),
		sockDir:   filepath.Join(root, "sock"),
		bins:      c.bins,
		acct:      c.acct,
		template:  c.template,
		appRole:   c.appRole,
		appPass:   c.appPass,
		superuser: c.superuser,
		serverNum: c.serverNum,
		settings:  settings,
	}
	s.tmplOnce.Do(func() {}) // the template and the app role came with the copy
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Destroy())
			s = nil
		}
	}()
	if err := os.Mkdir(s.sockDir, 0o700); err != nil {
		return s, err
	}
	for _, dir := range []string{root, s.sockDir} {
		if err := s.acct.chown(dir); err != nil {
			return s, fmt.Errorf("give %s to the server's user: %w", dir, err)
		}
	}
	if err := s.startWatchdog(); err != nil {
		return s, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	basebackup, err := c.bins.sibling("pg_basebackup")
	if err != nil {
		return s, err
	}
	if out, err := s.run(ctx, basebackup, "-D", s.dataDir, "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-h", "127.0.0.1", "-p", fmt.Sprint(c.port), "-U", c.superuser); err != nil {
		return s, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		if s.port, err = FreePort(); err != nil {
			return s, err
		}
		err = s.pgctlStart()
		if err == nil {
			break
		}
		if attempt == 4 || !strings.Contains(err.Error(), "already in use") {
			return s, err
		}
	}
	s.running = true
	if err := s.openMaint(); err != nil {
		return s, err
	}
	// Streaming: the primary sees the standby's receiver.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := c.maint.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&n); err != nil {
			return s, fmt.Errorf("replication state: %w", err)
		}
		if n > 0 {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, errors.New("the standby is not streaming after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncTo makes c's commits wait for a standby.
func (c *Cluster) syncTo() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range []string{
		`ALTER ROLE ALL SET synchronous_commit = on`,
		`ALTER SYSTEM SET synchronous_standby_names = '*'`,
		`SELECT pg_reload_conf()`,
	} {
		if _, err := c.maint.Exec(ctx, q); err != nil {
			return fmt.Errorf("synchronous replication: %s: %w", q, err)
		}
	}
	for {
		var n int
		if err := c.maint.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'`).Scan(&n); err != nil {
			return fmt.Errorf("synchronous replication: %w", err)
		}
		if n > 0 {
			return nil
		}
		if ctx.Err() != nil {
			return errors.New("synchronous replication: no synchronous standby after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Promote makes a standby (StartStandby) a primary: pg_ctl promote, waiting
// until it takes writes.
func (c *Cluster) Promote(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if out, err := c.run(ctx, c.bins.pgctl, "-D", c.dataDir, "-w", "-t", "60", "promote"); err != nil {
		t.Fatalf("pgtest: pg_ctl promote: %v\n%s", err, out)
	}
}

// Crash stops a private cluster at once (pg_ctl stop -m immediate), as a
// crash of its host would: sessions are cut, nothing more is written. Start
// starts it again.
func (c *Cluster) Crash(t testing.TB) {
	t.Helper()
	c.stopServer(t, "immediate", "crashed")
}

// DBURL is a URL of database on c as the superuser (admin) or, with app, as
// the app login role that DB.AppURL names.
func (c *Cluster) DBURL(database string, app bool) string {
	if app {
		return c.connString(c.appRole, c.appPass, database)
	}
	return c.connString("", "", database)
}

// sibling finds the server program name beside pg_ctl (following a
// symbolic link such as /usr/local/bin/pg_ctl), else on PATH.
func (b binaries) sibling(name string) (string, error) {
	if resolved, err := filepath.EvalSymlinks(b.pgctl); err == nil {
		if p := filepath.Join(filepath.Dir(resolved), name); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found beside %s nor on PATH", name, b.pgctl)
}
