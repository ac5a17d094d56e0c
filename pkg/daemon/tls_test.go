package daemon_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/tlstest"
)

// tlsBundle is a dev daemon serving TLS from files in dir.
type tlsBundle struct {
	d        *daemon.Daemon
	ca       *tlstest.CA
	dir      string
	certFile string
	keyFile  string
	token    string
	logs     *testlog.Buffer
	clock    *clockwork.FakeClock
}

// startTLS starts a dev daemon with a server certificate of a fresh CA;
// clientCA, when not nil, requires client certificates it signs.
func startTLS(t *testing.T, clientCA *tlstest.CA) *tlsBundle {
	t.Helper()
	b := &tlsBundle{ca: tlstest.NewCA(t, "test CA"), dir: t.TempDir(), logs: &testlog.Buffer{},
		clock: clockwork.NewFakeClock()}
	b.certFile, b.keyFile = b.ca.Issue(t, tlstest.Options{CommonName: "mcpd"}).Write(t, b.dir, "server")
	cfg := devConfig()
	cfg.BlindAfter = -1
	cfg.TLSCertFile, cfg.TLSKeyFile = b.certFile, b.keyFile
	if clientCA != nil {
		cfg.TLSClientCAFile = tlstest.WriteFile(t, b.dir, "client-ca.pem", clientCA.PEM)
	}
	var stdout testlog.Buffer
	b.d = start(t, cfg, daemon.Options{Clock: b.clock, Stdout: &stdout, TLSCheckInterval: 5 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(b.logs, nil))})
	m := tokenRE.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no token in the banner:\n%s", stdout.String())
	}
	b.token = m[1]
	if !strings.Contains(stdout.String(), "https://"+b.d.Addr()) {
		t.Fatalf("the banner does not give the https URL:\n%s", stdout.String())
	}
	return b
}

// httpsClient trusts ca and presents pair when not nil; it opens a new
// connection per request, so that each sees the certificate of the moment.
func httpsClient(t *testing.T, ca *tlstest.CA, pair *tlstest.Pair) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if pair != nil {
		cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// servedSerial connects and returns the serial number of the served
// certificate.
func servedSerial(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads what is served
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTLSOnly(t *testing.T) {
	b := startTLS(t, nil)
	base := "https://" + b.d.Addr()
	hc := httpsClient(t, b.ca, nil)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := get(t, hc, base+path); code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
	}
	_, metrics := get(t, hc, base+"/metrics")
	for _, name := range []string{"mcpd_tls_certificate_expiry_timestamp_seconds", "mcpd_tls_reloads_total 0",
		"mcpd_tls_reload_failures_total 0"} {
		if !strings.Contains(metrics, name) {
			t.Fatalf("metrics lack %q", name)
		}
	}

	// The API with the token, through pkg/client's TLS transport.
	tr, err := client.NewTLSTransport(client.TLSFiles{CAFile: tlstest.WriteFile(t, b.dir, "ca.pem", b.ca.PEM)})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(base, b.token, client.WithTransport(tr))
	defer c.CloseIdleConnections()
	if _, err := c.Servers(context.Background(), client.ListServersParams{}); err != nil {
		t.Fatal(err)
	}

	// Plain HTTP on the port gets no API.
	resp, err := http.Get("http://" + b.d.Addr() + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP served")
		}
	}
	// Nor does TLS 1.1.
	if conn, err := tls.Dial("tcp", b.d.Addr(), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}); err == nil { //nolint:gosec
		conn.Close()
		t.Fatal("TLS 1.1 handshake accepted")
	}
	// A client that does not know the CA is told so.
	_, err = client.New(base, b.token).Servers(context.Background(), client.ListServersParams{})
	if !client.UntrustedCertificate(err) {
		t.Fatalf("err %v, want an untrusted certificate", err)
	}
}

func TestMTLS(t *testing.T) {
	clientCA := tlstest.NewCA(t, "client CA")
	b := startTLS(t, clientCA)
	base := "https://" + b.d.Addr()
	pair := clientCA.Issue(t, tlstest.Options{CommonName: "mcpctl", Client: true})

	// Without a client certificate: no answer, not even /healthz.
	if _, err := httpsClient(t, b.ca, nil).Get(base + "/healthz"); err == nil {
		t.Fatal("served a client without a certificate")
	}
	// A certificate of another CA is refused too.
	other := tlstest.NewCA(t, "other").Issue(t, tlstest.Options{CommonName: "intruder", Client: true})
	if _, err := httpsClient(t, b.ca, &other).Get(base + "/healthz"); err == nil {
		t.Fatal("served a client certificate of an unknown CA")
	}

	hc := httpsClient(t, b.ca, &pair)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := get(t, hc, base+path); code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
	}
	// The bearer token is still required on /v1.
	if code, _ := get(t, hc, base+"/v1/mcp/servers"); code != http.StatusUnauthorized {
		t.Fatalf("/v1 without a token: %d", code)
	}
	certFile, keyFile := pair.Write(t, b.dir, "client")
	tr, err := client.NewTLSTransport(client.TLSFiles{CAFile: tlstest.WriteFile(t, b.dir, "ca.pem", b.ca.PEM),
		CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(base, b.token, client.WithTransport(tr))
	defer c.CloseIdleConnections()
	if _, err := c.Servers(context.Background(), client.ListServersParams{}); err != nil {
		t.Fatal(err)
	}
}

// metricValue reads one sample of the metrics text.
func metricValue(t *testing.T, hc *http.Client, base, name string) float64 {
	t.Helper()
	_, body := get(t, hc, base+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in the metrics", name)
	return 0
}

func TestTLSRotation(t *testing.T) {
	b := startTLS(t, nil)
	addr, base := b.d.Addr(), "https://"+b.d.Addr()
	hc := httpsClient(t, b.ca, nil)
	first := servedSerial(t, addr)

	// New files are served once the check interval has passed, not before.
	next := b.ca.Issue(t, tlstest.Options{CommonName: "mcpd", NotAfter: time.Now().Add(48 * time.Hour).Truncate(time.Second)})
	replace(t, b.certFile, next.CertPEM)
	replace(t, b.keyFile, next.KeyPEM)
	if got := servedSerial(t, addr); got != first {
		t.Fatal("new certificate served before the check interval")
	}
	b.clock.Advance(5 * time.Second)
	if got := servedSerial(t, addr); got != next.Cert.SerialNumber.String() {
		t.Fatalf("serial %s after the check interval, want the new %s", got, next.Cert.SerialNumber)
	}
	if got := metricValue(t, hc, base, "mcpd_tls_certificate_expiry_timestamp_seconds"); got != float64(next.Cert.NotAfter.Unix()) {
		t.Fatalf("expiry %v, want %d", got, next.Cert.NotAfter.Unix())
	}
	if got := metricValue(t, hc, base, "mcpd_tls_reloads_total"); got != 1 {
		t.Fatalf("reloads %v, want 1", got)
	}

	// A broken new pair keeps the previous one, logged and counted once.
	replace(t, b.keyFile, []byte("not a key"))
	for range 3 {
		b.clock.Advance(5 * time.Second)
		if got := servedSerial(t, addr); got != next.Cert.SerialNumber.String() {
			t.Fatalf("serial %s after a broken key, want the previous %s", got, next.Cert.SerialNumber)
		}
	}
	if got := metricValue(t, hc, base, "mcpd_tls_reload_failures_total"); got != 1 {
		t.Fatalf("failures %v, want 1", got)
	}
	if !strings.Contains(b.logs.String(), "TLS files not reloaded") {
		t.Fatalf("no error logged:\n%s", b.logs.String())
	}
	// So does a missing file; SIGHUP's Reload reports it.
	if err := os.Remove(b.keyFile); err != nil {
		t.Fatal(err)
	}
	if err := b.d.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reload of a missing key: %v", err)
	}
	if got := servedSerial(t, addr); got != next.Cert.SerialNumber.String() {
		t.Fatal("a missing key changed the served certificate")
	}

	// Reload (SIGHUP) serves new files at once, without waiting.
	third := b.ca.Issue(t, tlstest.Options{CommonName: "mcpd"})
	replace(t, b.certFile, third.CertPEM)
	replace(t, b.keyFile, third.KeyPEM)
	if err := b.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, addr); got != third.Cert.SerialNumber.String() {
		t.Fatalf("serial %s after Reload, want %s", got, third.Cert.SerialNumber)
	}
	if got := metricValue(t, hc, base, "mcpd_tls_reloads_total"); got != 2 {
		t.Fatalf("reloads %v, want 2", got)
	}
	if got := metricValue(t, hc, base, "mcpd_tls_reload_failures_total"); got != 2 {
		t.Fatalf("failures %v, want 2", got)
	}
}

// replace writes b to path through a rename, as a careful operator does.
func replace(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestTLSFilesAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := devConfig()
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(dir, "missing.crt"), filepath.Join(dir, "missing.key")
	d, err := daemon.New(cfg, daemon.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "missing.crt") {
		_ = d.Stop(context.Background())
		t.Fatalf("start with a missing certificate: %v", err)
	}
	_ = d.Stop(context.Background())
}
