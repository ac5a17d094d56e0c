package pgtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func fakeBin(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initdb", "pg_ctl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func noPath(string) (string, error) { return "", errors.New("not on PATH") }

func TestFinderNotFound(t *testing.T) {
	f := finder{
		lookPath: noPath,
		bindir:   func() (string, error) { return "", errors.New("no pg_config") },
		glob:     filepath.Join(t.TempDir(), "*", "bin"),
	}
	_, err := f.find()
	const want = "PostgreSQL server binaries (initdb, pg_ctl) not found: install them with " +
		"`apt-get install postgresql` (Debian/Ubuntu) or set MCPD_TEST_DATABASE_URL"
	if err == nil || err.Error() != want {
		t.Fatalf("find() error = %v, want %q", err, want)
	}
}

func TestFinderOrder(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "13", "16", "notaversion"} {
		fakeBin(t, filepath.Join(root, v, "bin"))
	}
	glob := filepath.Join(root, "*", "bin")

	f := finder{lookPath: noPath, glob: glob}
	b, err := f.find()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "16", "bin", "initdb"); b.initdb != want {
		t.Fatalf("newest: initdb = %s, want %s", b.initdb, want)
	}

	f.bindir = func() (string, error) { return filepath.Join(root, "13", "bin"), nil }
	if b, _ := f.find(); b.initdb != filepath.Join(root, "13", "bin", "initdb") {
		t.Fatalf("pg_config --bindir comes before the glob: initdb = %s", b.initdb)
	}

	f.lookPath = func(name string) (string, error) { return "/on/path/" + name, nil }
	if b, _ := f.find(); b.initdb != "/on/path/initdb" || b.pgctl != "/on/path/pg_ctl" {
		t.Fatalf("PATH comes first: %+v", b)
	}
}

func TestConnStringRewrites(t *testing.T) {
	for _, conn := range []string{
		"postgres://admin:secret@db.internal:6543/postgres?sslmode=disable&dbname=other",
		"host=db.internal port=6543 user=admin password=secret dbname=postgres sslmode=disable",
	} {
		s := withUser(withDatabase(conn, "mcpd_test_1"), "app", "pw'd")
		cfg, err := pgconn.ParseConfig(s)
		if err != nil {
			t.Fatalf("%s -> %s: %v", conn, s, err)
		}
		if cfg.Host != "db.internal" || cfg.Port != 6543 || cfg.Database != "mcpd_test_1" ||
			cfg.User != "app" || cfg.Password != "pw'd" {
			t.Fatalf("%s -> %s: host %s port %d db %s user %s password %s",
				conn, s, cfg.Host, cfg.Port, cfg.Database, cfg.User, cfg.Password)
		}
	}
}
