package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/testing/tlstest"
)

func TestTLSTransport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCA, clientCA := tlstest.NewCA(t, "server CA"), tlstest.NewCA(t, "client CA")
	pair := serverCA.Issue(t, tlstest.Options{CommonName: "mcpd"})
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(clientCA.PEM)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()

	caFile := tlstest.WriteFile(t, dir, "ca.pem", serverCA.PEM)
	certFile, keyFile := clientCA.Issue(t, tlstest.Options{CommonName: "c", Client: true}).Write(t, dir, "client")
	tr, err := client.NewTLSTransport(client.TLSFiles{CAFile: caFile, CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(srv.URL, "", client.WithTransport(tr))
	defer c.CloseIdleConnections()
	if err := c.Healthz(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Without the CA: not trusted, and said so.
	plain := client.New(srv.URL, "")
	err = plain.Healthz(context.Background())
	if !client.UntrustedCertificate(err) {
		t.Fatalf("err %v, want an untrusted certificate", err)
	}
	plain.CloseIdleConnections()

	for _, bad := range []client.TLSFiles{
		{CAFile: filepath.Join(dir, "missing.pem")},
		{CAFile: certFile + ".nothing"},
		{CAFile: tlstest.WriteFile(t, dir, "empty.pem", []byte("no PEM here"))},
		{CertFile: certFile},
		{CertFile: certFile, KeyFile: caFile},
	} {
		if _, err := client.NewTLSTransport(bad); err == nil {
			t.Fatalf("%+v: no error", bad)
		}
	}
}

func TestTokenFileFollowsTheFile(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("first\n")
	c := client.New(srv.URL, "fixed").WithTokenSource(client.NewTokenFile(path))
	defer c.CloseIdleConnections()
	ctx := context.Background()
	for _, step := range []func(){func() {}, func() {}, func() { write("second") }} {
		step()
		if err := c.Healthz(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := strings.Join(seen, ",")
	mu.Unlock()
	if got != "Bearer first,Bearer first,Bearer second" {
		t.Fatalf("tokens sent %s", got)
	}
	write("  \n")
	if err := c.Healthz(ctx); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty token file: %v", err)
	}
	os.Remove(path)
	if err := c.Healthz(ctx); err == nil || !strings.Contains(err.Error(), "token file") {
		t.Fatalf("missing token file: %v", err)
	}
}
