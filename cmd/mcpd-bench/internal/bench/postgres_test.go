package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
)

// TestHarnessOnPostgres runs the harness's measures at a tiny size on a
// cluster of its own: durable settings, the app role, the seed's ids, the
// sweep cases, pgbench, and the heartbeat, list and profile loads against
// mcpd's daemon in process.
func TestHarnessOnPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := t.TempDir()
	// PostgreSQL runs as nobody under root: it must pass through.
	for _, dir := range []string{filepath.Dir(work), work} {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	pg, err := StartPostgres(work)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pg.Destroy(); err != nil {
			t.Error(err)
		}
	})
	if pid := pg.PID(); pid <= 0 || parentOf(pid) == 0 {
		t.Fatalf("postmaster pid %d", pid)
	}
	if pg.FSType() == "" || pg.ServerVersion() == "" {
		t.Fatalf("file system %q, version %q", pg.FSType(), pg.ServerVersion())
	}
	if err := SetUp(ctx, pg); err != nil {
		t.Fatal(err)
	}
	admin := pool(t, pg.URL("postgres", Database))
	app := pool(t, pg.URL(AppRole, Database))

	var fsync, syncCommit, fpw string
	if err := admin.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('full_page_writes')`).Scan(&fsync, &syncCommit, &fpw); err != nil {
		t.Fatal(err)
	}
	if fsync != "on" || syncCommit != "on" || fpw != "on" {
		t.Fatalf("not durable: fsync %s, synchronous_commit %s, full_page_writes %s", fsync, syncCommit, fpw)
	}
	var super, bypass bool
	var roles []string
	if err := admin.QueryRow(ctx, `SELECT r.rolsuper, r.rolbypassrls,
		ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid)
		FROM pg_roles r WHERE r.rolname = $1`, AppRole).Scan(&super, &bypass, &roles); err != nil {
		t.Fatal(err)
	}
	if super || bypass || len(roles) != 1 || roles[0] != "cyberos_app" {
		t.Fatalf("app role: superuser %v, bypassrls %v, member of %v; want only cyberos_app", super, bypass, roles)
	}

	const tenants, modules = 5, 10
	at := time.Now().UTC().Truncate(time.Second)
	if err := SeedServers(ctx, admin, 1, tenants, modules, at, true); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= tenants*modules; n += 7 {
		var tenant string
		if err := admin.QueryRow(ctx, `SELECT tenant_id::text FROM mcp_servers WHERE server_id = $1`, ServerID(n)).Scan(&tenant); err != nil {
			t.Fatalf("server %d (%s): %v", n, ServerID(n), err)
		}
		if want := TenantID((n-1)/modules + 1).String(); tenant != want {
			t.Fatalf("server %d has tenant %s, want %s", n, tenant, want)
		}
	}

	none, err := SweepNothingDue(ctx, admin, app, at, 2)
	if err != nil {
		t.Fatal(err)
	}
	if none.Servers != tenants*modules || len(none.Runs) != 2 || none.Median <= 0 {
		t.Fatalf("nothing due: %+v", none)
	}
	due, err := SweepDue(ctx, admin, app, at, tenants*modules, 5, 2)
	if err != nil {
		t.Fatal(err)
	}
	if due.Due != 5 || len(due.Runs) != 2 {
		t.Fatalf("due: %+v", due)
	}
	var unhealthyEvents, notHealthy, unavailable int
	if err := admin.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM mcp_audit_events WHERE kind = 'mcp.server.unhealthy'),
		(SELECT count(*) FROM mcp_servers WHERE status <> 'healthy'),
		(SELECT count(*) FROM mcp_skills WHERE NOT available)`).Scan(&unhealthyEvents, &notHealthy, &unavailable); err != nil {
		t.Fatal(err)
	}
	if unhealthyEvents != 10 || notHealthy != 0 || unavailable != 0 {
		t.Fatalf("after the due sweeps: %d unhealthy events (want 10), %d servers not healthy and %d skills unavailable (want 0)",
			unhealthyEvents, notHealthy, unavailable)
	}

	walB, err := ReadWAL(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	cpu0 := TakeCPUSnapshot(0, pg.PID())
	pgb, err := Pgbench(ctx, pg, admin, work, tenants*modules, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// pg_waldump reads the WAL of pgbench's updates and commits.
	walE, err := ReadWAL(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := WALRecordStats(ctx, pg, walB.LSN, walE.LSN)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, s := range stats {
		kinds[strings.SplitN(s.Type, "/", 2)[0]] = s.Records > 0 && s.Bytes > 0
	}
	if !kinds["Heap"] || !kinds["Transaction"] {
		t.Fatalf("pg_waldump's record types of pgbench's WAL: %+v", stats)
	}
	if by := PostgresCPUByKind(pg.PID()); by["postmaster"] <= 0 || len(by) < 3 {
		t.Fatalf("PostgreSQL's CPU by process kind: %v", by)
	}
	if cpu := TakeCPUSnapshot(0, pg.PID()).Since(cpu0); cpu.Postgres <= 0 || cpu.Driver <= 0 {
		t.Fatalf("pgbench's run used no CPU of the cluster or of the driver (pgbench, reaped): %+v", cpu)
	}
	if pgb.TPS <= 0 || pgb.Clients != 2 {
		t.Fatalf("pgbench: %+v", pgb)
	}
	// The anchor: pgbench at a rate, and the WAL it writes.
	wal0, err := ReadWAL(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	rated, err := PgbenchRun(ctx, pg, admin, work, PgbenchOptions{Servers: tenants * modules, Clients: 2, Rate: 50, Duration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rated.TPS < 25 || rated.TPS > 75 {
		t.Fatalf("pgbench -R 50: %.1f transactions/s", rated.TPS)
	}
	wal1, err := ReadWAL(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if w := wal1.Since(wal0); w.LSN <= 0 {
		t.Fatalf("pgbench -R 50 wrote no WAL: %+v", w)
	}

	if err := SeedBigTenant(ctx, admin, 250, at); err != nil {
		t.Fatal(err)
	}
	secretFile, secret, err := WriteSecret(work)
	if err != nil {
		t.Fatal(err)
	}
	baseURL := startDaemon(t, pg.URL(AppRole, Database), secretFile)
	fleet, err := NewFleet(baseURL, secret, tenants, modules)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	// The loads stop at their call counts, long before their time on a
	// quiet machine; the time only bounds a starved one, which must still
	// finish some calls.
	const starved = 20 * time.Second
	hb := ClosedLoop(ctx, 4, starved, 200, fleet.Heartbeat)
	if hb.Errors != 0 || hb.Calls == 0 {
		t.Fatalf("heartbeats: %+v", hb)
	}
	small := ListPage(ctx, fleet.Client(2), modules, starved, 20)
	if small.Errors != 0 || small.Calls == 0 {
		t.Fatalf("list: %+v", small)
	}
	big, err := NewTenantClient(baseURL, secret, BigTenantID())
	if err != nil {
		t.Fatal(err)
	}
	defer big.CloseIdleConnections()
	paging := ListPaging(ctx, big, 100, 250, time.Minute, 6) // two walks of three pages
	if paging.Errors != 0 || paging.Calls != 6 {
		t.Fatalf("paging: %+v", paging)
	}
	if wrong := ListPaging(ctx, big, 100, 251, time.Minute, 3); wrong.Errors != 1 {
		t.Fatalf("a walk of the wrong length was not an error: %+v", wrong)
	}

	prof, err := ProfileHeartbeats(ctx, pg.URL(AppRole, Database), secretFile, secret, tenants, modules, 4,
		starved, 500, filepath.Join(work, "profiles"))
	if err != nil {
		t.Fatal(err)
	}
	if prof.Load.Errors != 0 || prof.Load.Calls == 0 {
		t.Fatalf("profiled load: %+v", prof.Load)
	}
	for _, f := range []string{prof.CPU, prof.AllocsBefore, prof.AllocsAfter} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Fatalf("profile %s: %v", f, err)
		}
	}
}

func pool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := newPool(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// startDaemon starts mcpd's daemon in process on a free loopback port and
// returns its base URL.
func startDaemon(t *testing.T, databaseURL, secretFile string) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.DatabaseURL = databaseURL
	cfg.AuthJWTSecretFile = secretFile
	cfg.HeartbeatInterval = mcpdHeartbeatInterval
	d, err := daemon.New(cfg, daemon.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return "http://" + d.Addr()
}

func TestProcessStopOnSIGTERM(t *testing.T) {
	p, err := StartProcess("sleep", "/bin/sleep", filepath.Join(t.TempDir(), "sleep.log"), []string{"30"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatal("exited at once")
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatalf("stop on SIGTERM: %v", err)
	}
	if !p.Exited() {
		t.Fatal("not exited after Stop")
	}
	failing, err := StartProcess("false", "/bin/false", filepath.Join(t.TempDir(), "false.log"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := failing.WaitHTTP(context.Background(), "http://127.0.0.1:1/", 10*time.Second); err == nil {
		t.Fatal("WaitHTTP on a process that exited did not fail")
	}
}
