package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
	"github.com/cyberos/mcpd/pkg/testing/tlstest"
)

// TestTLSAndMTLSEndToEnd runs the mcpd binary HTTPS-only with mTLS, and
// the mcpctl binary against it with --ca-file and a client certificate;
// a client without one is refused; the certificate is rotated by writing
// new files (picked up within 10 s) and by SIGHUP (at once).
func TestTLSAndMTLSEndToEnd(t *testing.T) {
	db := pgtest.NewDB(t)
	dir := t.TempDir()
	serverCA, clientCA := tlstest.NewCA(t, "server CA"), tlstest.NewCA(t, "client CA")
	certFile, keyFile := serverCA.Issue(t, tlstest.Options{CommonName: "mcpd"}).Write(t, dir, "server")
	caFile := tlstest.WriteFile(t, dir, "server-ca.pem", serverCA.PEM)
	clientCAFile := tlstest.WriteFile(t, dir, "client-ca.pem", clientCA.PEM)
	clientPair := clientCA.Issue(t, tlstest.Options{CommonName: "mcpctl", Client: true})
	clientCert, clientKey := clientPair.Write(t, dir, "client")

	p := startMcpd(t, db.AppURL, "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-client-ca-file", clientCAFile)
	base := "https://" + p.addr
	token := p.token(t, uuid.New())

	mcpctl := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(mcpctlPath(t), append([]string{"--server", base, "--token", token}, args...)...)
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
	tlsFlags := []string{"--ca-file", caFile, "--client-cert-file", clientCert, "--client-key-file", clientKey}
	if code, out, errOut := mcpctl(append(tlsFlags, "register", "--module", "calendar", "--version", "1.0.0",
		"--protocol", "2025-06-18", "-o", "json")...); code != 0 || !strings.Contains(out, `"module_name": "calendar"`) {
		t.Fatalf("register: exit %d stdout %q stderr %q", code, out, errOut)
	}
	if code, out, errOut := mcpctl(append(tlsFlags, "list")...); code != 0 || !strings.Contains(out, "calendar") {
		t.Fatalf("list: exit %d stdout %q stderr %q", code, out, errOut)
	}
	if code, _, errOut := mcpctl("--client-cert-file", clientCert, "--client-key-file", clientKey, "list"); code != 1 ||
		!strings.Contains(errOut, "not trusted") || !strings.Contains(errOut, "--ca-file") {
		t.Fatalf("without --ca-file: exit %d stderr %q", code, errOut)
	}
	if code, out, errOut := mcpctl("--ca-file", caFile, "list"); code != 1 || out != "" {
		t.Fatalf("without a client certificate: exit %d stdout %q stderr %q", code, out, errOut)
	}

	// Plain HTTP on the port: no API.
	if resp, err := http.Get("http://" + p.addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP served")
		}
	}

	// Rotation by writing the files: served within 10 s.
	second := serverCA.Issue(t, tlstest.Options{CommonName: "mcpd"})
	rename(t, certFile, second.CertPEM)
	rename(t, keyFile, second.KeyPEM)
	testwait.Eventually(t, "the rewritten certificate served", func() bool {
		return servedSerial(t, p.addr, clientPair) == second.Cert.SerialNumber.String()
	})
	// Rotation by SIGHUP: at once.
	third := serverCA.Issue(t, tlstest.Options{CommonName: "mcpd"})
	rename(t, certFile, third.CertPEM)
	rename(t, keyFile, third.KeyPEM)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "SIGHUP: the new certificate served", 2*time.Second, func() bool {
		return servedSerial(t, p.addr, clientPair) == third.Cert.SerialNumber.String()
	})
	// A broken file on SIGHUP keeps the certificate and the process.
	rename(t, keyFile, []byte("broken"))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the broken key logged", func() bool { return strings.Contains(p.stderr.String(), "TLS files not reloaded") })
	if !p.running() || servedSerial(t, p.addr, clientPair) != third.Cert.SerialNumber.String() {
		t.Fatal("a broken key on SIGHUP changed the certificate or stopped mcpd")
	}

	hc := mtlsClient(t, serverCA, clientPair)
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// At least the two rotations and the broken key (a look at the files
	// between a write and its SIGHUP counts once more).
	expiry := metricValue(string(metrics), "mcpd_tls_certificate_expiry_timestamp_seconds", nil)
	reloads := metricValue(string(metrics), "mcpd_tls_reloads_total", nil)
	failures := metricValue(string(metrics), "mcpd_tls_reload_failures_total", nil)
	if expiry != float64(third.Cert.NotAfter.Unix()) || reloads < 2 || failures < 1 {
		t.Fatalf("TLS metrics:\n%s", strings.Join(grepLinesPrefix(string(metrics), "mcpd_tls"), "\n"))
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
}

func rename(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// servedSerial is the serial number of the certificate a new connection
// to addr gets.
func servedSerial(t *testing.T, addr string, client tlstest.Pair) string {
	t.Helper()
	cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}) //nolint:gosec // reads what is served
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func mtlsClient(t *testing.T, ca *tlstest.CA, client tlstest.Pair) *http.Client {
	t.Helper()
	cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}
