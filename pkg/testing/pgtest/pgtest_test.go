package pgtest_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cyberos/mcpd/migrations"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/schema"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestNewDBIsMigrated(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	if err := pgstore.CheckSchema(ctx, db.Admin); err != nil {
		t.Fatalf("Check(admin) = %v, want nil", err)
	}
	if err := pgstore.CheckSchema(ctx, db.App); err != nil {
		t.Fatalf("Check(app) = %v, want nil", err)
	}
	st, err := schema.Current(ctx, db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	if want := (schema.Status{Version: migrations.Latest, Latest: migrations.Latest, Applied: true, Engine: schema.EnginePostgreSQL}); st != want {
		t.Fatalf("Current = %+v, want %+v", st, want)
	}
	var name string
	if err := db.Admin.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != db.Name {
		t.Fatalf("Admin is on %q, want %q", name, db.Name)
	}
	if err := db.App.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != db.Name {
		t.Fatalf("App is on %q, want %q", name, db.Name)
	}
}

func TestNewDBsAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := pgtest.NewDB(t), pgtest.NewDB(t)
	if a.Name == b.Name {
		t.Fatalf("two databases named %q", a.Name)
	}
	if _, err := a.Admin.Exec(ctx, `CREATE TABLE only_in_a (id int)`); err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := b.Admin.QueryRow(ctx, `SELECT to_regclass('only_in_a') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatal("a table made in one database is in another")
	}
}

func TestAppRoleHoldsOnlyCyberosApp(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	var (
		user                          string
		super, bypass, createdb, role bool
	)
	err := db.App.QueryRow(ctx, `SELECT current_user, rolsuper, rolbypassrls, rolcreatedb, rolcreaterole
		FROM pg_roles WHERE rolname = current_user`).Scan(&user, &super, &bypass, &createdb, &role)
	if err != nil {
		t.Fatal(err)
	}
	if super || bypass || createdb || role {
		t.Fatalf("app role %s: superuser=%v bypassrls=%v createdb=%v createrole=%v, want all false",
			user, super, bypass, createdb, role)
	}
	rows, err := db.App.Query(ctx, `SELECT r.rolname FROM pg_auth_members m
		JOIN pg_roles r ON r.oid = m.roleid WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user)`)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0] != "cyberos_app" {
		t.Fatalf("app role is a member of %v, want [cyberos_app]", groups)
	}
	var owned int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_shdepend
		WHERE refclassid = 'pg_authid'::regclass AND deptype = 'o'
		  AND refobjid = (SELECT oid FROM pg_roles WHERE rolname = $1)`, user).Scan(&owned); err != nil {
		t.Fatal(err)
	}
	if owned != 0 {
		t.Fatalf("app role owns %d objects, want 0", owned)
	}
}

func TestNewDBIsDroppedInCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("use", func(t *testing.T) {
		name = pgtest.NewDB(t).Name
	})
	probe := pgtest.NewDB(t)
	var exists bool
	if err := probe.Admin.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test's cleanup", name)
	}
}

func TestNewDBIsFast(t *testing.T) {
	pgtest.Shared(t).NewDB(t) // the template, once
	const n = 10
	var total, worst time.Duration
	for range n {
		start := time.Now()
		pgtest.NewDB(t)
		d := time.Since(start)
		total += d
		worst = max(worst, d)
	}
	t.Logf("NewDB: %d clones, mean %.1f ms, slowest %.1f ms", n,
		float64(total.Microseconds())/n/1000, float64(worst.Microseconds())/1000)
}

func TestClusterStopStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.NewCluster(t)
	port := c.Port()
	db := c.NewDB(t)
	if _, err := db.Admin.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before')`); err != nil {
		t.Fatal(err)
	}
	c.Stop(t)
	if _, err := db.Admin.Exec(ctx, `SELECT 1`); err == nil {
		t.Fatal("query on a stopped cluster succeeded")
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err == nil {
		_ = conn.Close()
		t.Fatal("a stopped cluster still accepts connections")
	}
	c.Start(t)
	if c.Port() != port {
		t.Fatalf("port after Start = %d, want %d", c.Port(), port)
	}
	var v string
	// The pool's old connections died with the server; a new one answers.
	var lastErr error
	for range 3 {
		if lastErr = db.Admin.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("after Start: %v", lastErr)
	}
	if v != "before" {
		t.Fatalf("kept = %q, want %q", v, "before")
	}
	// The template still clones after a restart.
	db2 := c.NewDB(t)
	if err := pgstore.CheckSchema(ctx, db2.App); err != nil {
		t.Fatal(err)
	}
}

// helperEnv tells TestHelperProcess what to do in a child test binary.
const helperEnv = "PGTEST_HELPER"

// TestHelperProcess is the child of the tests below; run by itself it does
// nothing.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "":
		return
	case "panic":
		db := pgtest.NewDB(t)
		var dir string
		if err := db.Admin.QueryRow(context.Background(), `SHOW data_directory`).Scan(&dir); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("HELPER port=%d dir=%s\n", pgtest.Shared(t).Port(), dir)
		panic("helper panics on purpose")
	case "external":
		db := pgtest.NewDB(t)
		ctx := context.Background()
		if err := pgstore.CheckSchema(ctx, db.App); err != nil {
			t.Fatal(err)
		}
		var user string
		if err := db.App.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(user, "mcpd_test_app_") {
			t.Fatalf("app role on an external server = %q, want mcpd_test_app_<suffix>", user)
		}
		// The app role needs its password there: trust is not assumed.
		appCfg, err := pgconn.ParseConfig(db.AppURL)
		if err != nil {
			t.Fatal(err)
		}
		if appCfg.Password == "" {
			t.Fatal("AppURL has no password")
		}
		fmt.Printf("HELPER ok user=%s db=%s\n", user, db.Name)
	default:
		t.Fatalf("unknown %s", helperEnv)
	}
}

func helper(t *testing.T, mode string, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestPanicStopsSharedCluster(t *testing.T) {
	t.Parallel()
	out, err := helper(t, "panic", pgtest.EnvDatabaseURL+"=")
	if err == nil {
		t.Fatalf("panicking helper exited 0:\n%s", out)
	}
	var port int
	var dir string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "HELPER port=%d dir=%s", &port, &dir); err == nil {
			break
		}
	}
	if port == 0 || dir == "" {
		t.Fatalf("helper did not report its cluster:\n%s", out)
	}
	// The watchdog stops the server and removes the directory after the
	// process is gone; give it a bounded while.
	testwait.Poll(t, "the watchdog's cleanup after the helper panicked", 30*time.Second, func() error {
		_, statErr := os.Stat(dir)
		conn, dialErr := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if dialErr == nil {
			_ = conn.Close()
		}
		if errors.Is(statErr, os.ErrNotExist) && dialErr != nil {
			return nil
		}
		return fmt.Errorf("data dir %s stat err %v, port %d dial err %v", dir, statErr, port, dialErr)
	})
}

func TestExternalServer(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCluster(t)
	server := c.NewEmptyDB(t)
	ctx := context.Background()
	cfg, err := pgconn.ParseConfig(server.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]string{
		"url": server.AdminURL,
		"dsn": fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", cfg.Port, cfg.User, cfg.Database),
	}
	for name, conn := range forms {
		t.Run(name, func(t *testing.T) {
			out, err := helper(t, "external", pgtest.EnvDatabaseURL+"="+conn)
			if err != nil || !strings.Contains(out, "HELPER ok") {
				t.Fatalf("helper on the external server: %v\n%s", err, out)
			}
			// It left nothing behind: no database, no role.
			var dbs, roles []string
			rows, err := server.Admin.Query(ctx, `SELECT datname FROM pg_database
				WHERE datname NOT IN ('postgres', 'template0', 'template1', $1) ORDER BY 1`, server.Name)
			if err != nil {
				t.Fatal(err)
			}
			if dbs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				t.Fatal(err)
			}
			rows, err = server.Admin.Query(ctx, `SELECT rolname FROM pg_roles WHERE rolname LIKE 'mcpd\_test\_app%' ORDER BY 1`)
			if err != nil {
				t.Fatal(err)
			}
			if roles, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				t.Fatal(err)
			}
			if len(dbs) != 0 || len(roles) != 0 {
				t.Fatalf("left behind on the external server: databases %v, roles %v", dbs, roles)
			}
		})
	}
}
