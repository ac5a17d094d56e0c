package schema

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// connStrings are connection strings as users write them, with the
// keywords parseConnString reads from each and its lock name.
var connStrings = []struct {
	in, wantDSN, wantLock string
}{
	{"postgres://u:p@db.example:5432/mcpd?sslmode=disable",
		`dbname='mcpd' host='db.example' password='p' port='5432' sslmode='disable' user='u'`, "/mcpd"},
	{"postgresql://u@h/d", `dbname='d' host='h' user='u'`, "/d"},
	{"POSTGRES://u@h/d", `dbname='d' host='h' user='u'`, "/d"},
	{"pgx5://u@h/d", `dbname='d' host='h' user='u'`, "/d"},
	{"  postgres://u@h/d\n", `dbname='d' host='h' user='u'`, "/d"},
	{"postgres://u@h", `host='h' user='u'`, ""},
	// Several hosts, as libpq and pgx take them; a host without a port
	// gets the default one when another names a port.
	{"postgres://u@p1:5433,p2,[::1]:5434/d?target_session_attrs=read-write",
		`dbname='d' host='p1,p2,::1' port='5433,5432,5434' target_session_attrs='read-write' user='u'`, "/d"},
	{"postgres://u@p1,p2/d", `dbname='d' host='p1,p2' user='u'`, "/d"},
	{"postgres:///d?host=/var/run/postgresql", `dbname='d' host='/var/run/postgresql'`, "/d"},
	{"host=127.0.0.1 port=5432 user=mcpd dbname=registry sslmode=disable",
		`dbname='registry' host='127.0.0.1' port='5432' sslmode='disable' user='mcpd'`, "/registry"},
	{"host=/var/run/postgresql dbname=registry", `dbname='registry' host='/var/run/postgresql'`, "/registry"},
	{`user=a password='it\'s a secret' dbname = 'my db'`, `dbname='my db' password='it\'s a secret' user='a'`, "/my db"},
	{`password=p@ss host=h`, `host='h' password='p@ss'`, "/"},
	{`password=x://y host=h`, `host='h' password='x://y'`, "/"},
	{`user=o\'neil password='a b\\c' dbname=x`, `dbname='x' password='a b\\c' user='o\'neil'`, "/x"},
}

func TestParseConnString(t *testing.T) {
	for _, tt := range connStrings {
		cfg, err := parseConnString(tt.in)
		if err != nil {
			t.Errorf("parseConnString(%q): %v", tt.in, err)
			continue
		}
		if got := dsn(cfg.params); got != tt.wantDSN || cfg.lockName != tt.wantLock {
			t.Errorf("parseConnString(%q) = %s, lock %q; want %s, lock %q", tt.in, got, cfg.lockName, tt.wantDSN, tt.wantLock)
		}
	}
}

func TestParseConnStringRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"   ",
		"mysql://u@h/d",
		"host",
		"host=h user",
		"password='unterminated",
		"password='a'b",
		"=x",
		"postgres://u@h1,,h2/d",
		"postgres://u:secret@h:port/d",
		"postgres://u:secret@h:0/d",
		"postgres://u:secret@h:1,h:99999/d",
	} {
		cfg, err := parseConnString(in)
		if err == nil {
			t.Errorf("parseConnString(%q) = %v, want an error", in, cfg.params)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("parseConnString(%q): error %q quotes the password", in, err)
		}
	}
}

func TestPrepareConn(t *testing.T) {
	t.Setenv("PGSSLMODE", "prefer") // restored at the end
	_ = os.Unsetenv("PGSSLMODE")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// pgxpool's and golang-migrate's own keywords are not sent to the server.
	_, lock, app, err := prepareConn(ctx, "postgres://u@h/d?pool_max_conns=4&x-migrations-table=m&statement_cache_capacity=0")
	if err != nil {
		t.Fatal(err)
	}
	if lock != "/d" || !strings.HasPrefix(app, "mcpd-migrate-") {
		t.Fatalf("lock %q, application_name %q", lock, app)
	}
	cfg, _ := parseConnString("postgres://u@h/d?pool_max_conns=4&x-migrations-table=m&sslmode=disable")
	for _, k := range []string{"pool_max_conns", "x-migrations-table"} {
		if !clientOnlyKey(k) {
			t.Errorf("clientOnlyKey(%q) = false", k)
		}
	}
	if clientOnlyKey("sslmode") || clientOnlyKey("target_session_attrs") || cfg.params["sslmode"] != "disable" {
		t.Error("libpq keywords must reach the connection")
	}
	if err := ValidateURL("postgres://u@h/d?sslmode=bogus"); err == nil {
		t.Error("ValidateURL accepts sslmode=bogus")
	}
	if err := ValidateURL("postgres://u@h/d"); err != nil {
		t.Errorf("ValidateURL: %v", err)
	}
}

// TestConnStringAgreesWithPgconn: every connection string above names the
// same hosts, ports, user, password and database to the migrator as to
// pgconn.ParseConfig, mcpd's own reader (which mcpctl cannot link).
func TestConnStringAgreesWithPgconn(t *testing.T) {
	for _, k := range []string{"PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSERVICE", "PGSSLMODE"} {
		t.Setenv(k, "")
	}
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	for _, tt := range connStrings {
		cfg, err := parseConnString(tt.in)
		if err != nil {
			t.Fatalf("parseConnString(%q): %v", tt.in, err)
		}
		conn := strings.TrimSpace(tt.in)
		for _, scheme := range []string{"postgresql://", "postgres://", "pgx5://"} {
			if strings.HasPrefix(strings.ToLower(conn), scheme) {
				conn = "postgres://" + conn[len(scheme):]
			}
		}
		pc, err := pgconn.ParseConfig(conn)
		if err != nil {
			t.Errorf("pgconn.ParseConfig(%q): %v", tt.in, err)
			continue
		}
		// The hosts in order, each once (pgconn tries some twice, with and
		// without TLS).
		var hosts, ports []string
		for _, fb := range append([]*pgconn.FallbackConfig{{Host: pc.Host, Port: pc.Port}}, pc.Fallbacks...) {
			port := strconv.Itoa(int(fb.Port))
			if n := len(hosts); n > 0 && hosts[n-1] == fb.Host && ports[n-1] == port {
				continue
			}
			hosts, ports = append(hosts, fb.Host), append(ports, port)
		}
		p := cfg.params
		if h, ok := p["host"]; ok && !slices.Equal(strings.Split(h, ","), hosts) {
			t.Errorf("%q: hosts %q here, %q in pgconn", tt.in, h, hosts)
		}
		wantPorts := strings.Split(p["port"], ",")
		if p["port"] == "" {
			wantPorts = slices.Repeat([]string{"5432"}, len(hosts))
		}
		if !slices.Equal(wantPorts, ports) {
			t.Errorf("%q: ports %q here, %q in pgconn", tt.in, wantPorts, ports)
		}
		for k, got := range map[string]string{"user": pc.User, "password": pc.Password, "dbname": pc.Database} {
			if want, ok := p[k]; ok && want != got {
				t.Errorf("%q: %s %q here, %q in pgconn", tt.in, k, want, got)
			}
		}
	}
}
