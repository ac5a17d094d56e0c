package daemon_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/testing/tlstest"
)

// TestAnswerToAnUnreadRequestArrivesOverTLS: over TLS too, a 70 KB URL on
// HTTP/1.1 gets its whole 431, then the end of the stream, never a reset.
// (Over HTTP/2 the bound is SETTINGS_MAX_HEADER_LIST_SIZE: clients refuse
// to send past it, and Go's HTTP/2 server ends a connection that does with
// GOAWAY; see docs/security.md.)
func TestAnswerToAnUnreadRequestArrivesOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	cfg := devConfig()
	cfg.TLSCertFile, cfg.TLSKeyFile = ca.Issue(t, tlstest.Options{CommonName: "mcpd"}).Write(t, dir, "server")
	d := start(t, cfg, daemon.Options{})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, path := range []string{"/healthz?x=", "/v0.1/servers?search="} {
		conn, err := tls.Dial("tcp", d.Addr(), &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.SetDeadline(time.Now().Add(pollCap)); err != nil {
			t.Fatal(err)
		}
		go func() {
			_, _ = io.WriteString(conn, "GET "+path+strings.Repeat("a", 70<<10)+" HTTP/1.1\r\nHost: mcpd\r\n\r\n")
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s…: reading the answer: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || len(body) == 0 {
			t.Fatalf("%s…: %d %q (%v), want 431 with a body", path, resp.StatusCode, body, err)
		}
		_ = conn.Close()
	}
}
