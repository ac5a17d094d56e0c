package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/tlstest"
)

// TestPostgresOverTLS: PostgreSQL with ssl=on and a certificate made here;
// pgstore and mcpd connect with sslmode=verify-full against its CA, over
// TLS, and fail with a clear error against another CA.
func TestPostgresOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "postgres CA")
	pair := ca.Issue(t, tlstest.Options{CommonName: "localhost"})
	cluster := pgtest.NewClusterWith(t, pgtest.ClusterOptions{
		Files: map[string][]byte{"server.crt": pair.CertPEM, "server.key": pair.KeyPEM},
		Settings: map[string]string{
			"ssl": "on", "ssl_cert_file": "{dir}/server.crt", "ssl_key_file": "{dir}/server.key",
			"ssl_min_protocol_version": "TLSv1.2",
		},
	})
	db := cluster.NewDB(t)
	dir := t.TempDir()
	verifyURL := func(name string, caPEM []byte) string {
		u, err := url.Parse(db.AppURL)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("sslmode", "verify-full")
		q.Set("sslrootcert", tlstest.WriteFile(t, dir, name+".pem", caPEM))
		u.RawQuery = q.Encode()
		return u.String()
	}
	good := verifyURL("root", ca.PEM)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pool, err := pgstore.Connect(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	var ssl bool
	var version string
	if err := pool.QueryRow(ctx, `SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl, &version); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	if !ssl || !strings.HasPrefix(version, "TLSv1.") {
		t.Fatalf("connection ssl=%v version %q, want TLS", ssl, version)
	}

	// Another CA: refused, saying why.
	bad := verifyURL("other", tlstest.NewCA(t, "other CA").PEM)
	pool, err = pgstore.Connect(ctx, bad)
	if err == nil {
		err = pool.Ping(ctx)
		pool.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("with another CA: %v, want an unknown authority", err)
	}

	// mcpd itself: ready over verify-full; with the wrong CA it says why and
	// answers 503.
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	secretFile := tlstest.WriteFile(t, dir, "jwt.secret", []byte(hex.EncodeToString(secret)))
	for _, c := range []struct {
		url   string
		ready int
	}{{good, http.StatusOK}, {bad, http.StatusServiceUnavailable}} {
		cfg := config.Default()
		cfg.Listen, cfg.DatabaseURL, cfg.AuthJWTSecretFile = "127.0.0.1:0", c.url, secretFile
		logs := &testlog.Buffer{}
		d, err := daemon.New(cfg, daemon.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + d.Addr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := d.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.ready {
			t.Fatalf("readyz %d, want %d; logs:\n%s", resp.StatusCode, c.ready, logs)
		}
		if c.ready != http.StatusOK && !strings.Contains(logs.String(), "certificate signed by unknown authority") {
			t.Fatalf("no reason logged for the refused database:\n%s", logs)
		}
	}
}
