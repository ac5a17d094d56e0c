package cli

import (
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/testing/tlstest"
)

// tlsServer is the API over memstore behind TLS that requires client
// certificates of its own CA (mTLS), and the files a client needs.
type tlsServer struct {
	url                   string
	token                 string
	caFile                string
	clientCert, clientKey string
	otherCert, otherKey   string
}

func startTLSServer(t *testing.T) *tlsServer {
	t.Helper()
	dir := t.TempDir()
	serverCA, clientCA := tlstest.NewCA(t, "server CA"), tlstest.NewCA(t, "client CA")
	pair := serverCA.Issue(t, tlstest.Options{CommonName: "mcpd"})
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AppendCertsFromPEM(clientCA.PEM)

	clock := clockwork.NewFakeClockAt(testStart)
	reg := lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: memstore.New(clock), HeartbeatInterval: 10 * time.Second})
	secret := testSecret(t)
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.NewHandler(api.HandlerOptions{Registrar: reg, Verifier: verifier}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: clients,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	token, err := auth.Issue(secret, uuid.New(), "test", "mcp:read mcp:write", time.Hour, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{url: strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), token: token,
		caFile: tlstest.WriteFile(t, dir, "ca.pem", serverCA.PEM)}
	s.clientCert, s.clientKey = clientCA.Issue(t, tlstest.Options{CommonName: "mcpctl", Client: true}).Write(t, dir, "client")
	s.otherCert, s.otherKey = tlstest.NewCA(t, "other").Issue(t, tlstest.Options{CommonName: "x", Client: true}).Write(t, dir, "other")
	return s
}

// isolateTLS clears the TLS variables as isolate clears the others.
func isolateTLS(t *testing.T) {
	t.Helper()
	for _, k := range []string{EnvCAFile, EnvClientCertFile, EnvClientKeyFile} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

func TestTLSFlagsEndToEnd(t *testing.T) {
	isolate(t)
	isolateTLS(t)
	s := startTLSServer(t)
	base := []string{"--server", s.url, "--token", s.token}
	withTLS := append(append([]string{}, base...), "--ca-file", s.caFile, "--client-cert-file", s.clientCert,
		"--client-key-file", s.clientKey)

	code, out, errOut := mainRun(t, append(withTLS, "register", "--module", "calendar", "--version", "1.0.0",
		"--protocol", "2025-06-18", "-o", "json")...)
	if code != 0 || !strings.Contains(out, `"module_name": "calendar"`) {
		t.Fatalf("register over mTLS: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, errOut = mainRun(t, append(withTLS, "list")...)
	if code != 0 || !strings.Contains(out, "calendar") {
		t.Fatalf("list over mTLS: exit %d stdout %q stderr %q", code, out, errOut)
	}

	// The same from the environment, and from the config file.
	t.Setenv(EnvCAFile, s.caFile)
	t.Setenv(EnvClientCertFile, s.clientCert)
	t.Setenv(EnvClientKeyFile, s.clientKey)
	if code, out, errOut := mainRun(t, append(base, "list")...); code != 0 || !strings.Contains(out, "calendar") {
		t.Fatalf("list with the TLS variables: exit %d stdout %q stderr %q", code, out, errOut)
	}
	for _, k := range []string{EnvCAFile, EnvClientCertFile, EnvClientKeyFile} {
		os.Unsetenv(k)
	}
	file := writeFile(t, "config.yaml", "ca_file: "+s.caFile+"\nclient_cert_file: "+s.clientCert+
		"\nclient_key_file: "+s.clientKey+"\n")
	if code, out, errOut := mainRun(t, append(base, "--config", file, "list")...); code != 0 || !strings.Contains(out, "calendar") {
		t.Fatalf("list with the config file: exit %d stdout %q stderr %q", code, out, errOut)
	}

	// An untrusted certificate: exit 1, said so, with the flag to use.
	code, _, errOut = mainRun(t, append(base, "--client-cert-file", s.clientCert, "--client-key-file", s.clientKey, "list")...)
	if code != 1 || !strings.Contains(errOut, "certificate is not trusted") || !strings.Contains(errOut, "--ca-file") {
		t.Fatalf("untrusted: exit %d stderr %q", code, errOut)
	}
	// No client certificate, or one of another CA: refused, exit 1.
	for _, extra := range [][]string{
		{"--ca-file", s.caFile},
		{"--ca-file", s.caFile, "--client-cert-file", s.otherCert, "--client-key-file", s.otherKey},
	} {
		if code, out, errOut := mainRun(t, append(append(append([]string{}, base...), extra...), "list")...); code != 1 || out != "" {
			t.Fatalf("%q: exit %d stdout %q stderr %q, want 1", extra, code, out, errOut)
		}
	}
	// Half a pair, or a CA file that is missing: bad usage.
	for _, extra := range [][]string{
		{"--client-cert-file", s.clientCert},
		{"--ca-file", s.caFile + ".missing"},
	} {
		if code, _, errOut := mainRun(t, append(append(append([]string{}, base...), extra...), "list")...); code != 2 {
			t.Fatalf("%q: exit %d stderr %q, want 2", extra, code, errOut)
		}
	}
}
