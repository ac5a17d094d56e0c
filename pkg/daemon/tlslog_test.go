package daemon_test

import (
	"net"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/testing/testwait"
	"github.com/cyberos/mcpd/pkg/testing/tlstest"
)

// TestTLSHandshakeErrorsCountedAndSampled: failed handshakes are counted in
// mcpd_tls_handshake_errors_total{reason} and only a few of them per
// minute are logged, the next logged line saying how many were left out.
// Before, each was a WARN line: 8 clients without a client certificate
// for 20 s made 14,953 lines (2.3 MB).
func TestTLSHandshakeErrorsCountedAndSampled(t *testing.T) {
	clientCA := tlstest.NewCA(t, "client CA")
	b := startTLS(t, clientCA)
	base := "https://" + b.d.Addr()
	pair := clientCA.Issue(t, tlstest.Options{CommonName: "ops", Client: true})
	ops := httpsClient(t, b.ca, &pair)
	bare := httpsClient(t, b.ca, nil)

	const failed = 40
	for range failed {
		if resp, err := bare.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			t.Fatal("served a client without a certificate")
		}
	}
	const metric = `mcpd_tls_handshake_errors_total{reason="no_client_certificate"}`
	testwait.Eventually(t, "every failed handshake counted", func() bool {
		return metricValue(t, ops, base, metric) == failed
	})
	handshakeLines := func() int { return strings.Count(b.logs.String(), "TLS handshake error") }
	if n := handshakeLines(); n < 1 || n > 5 {
		t.Fatalf("%d failed handshakes logged %d lines, want 1 to 5:\n%s", failed, n, b.logs.String())
	}

	// A minute later the next one is logged, with the count left out.
	logged := handshakeLines()
	b.clock.Advance(61e9)
	if resp, err := bare.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
	}
	testwait.Eventually(t, "the next window's first failure logged", func() bool { return handshakeLines() == logged+1 })
	if want := `"suppressed":35`; !strings.Contains(b.logs.String(), want) {
		t.Fatalf("no count of the lines left out (%s) in:\n%s", want, b.logs.String())
	}

	// Bytes that are not TLS (nor HTTP, which gets a 400 unlogged): counted
	// under their own reason.
	c, err := net.Dial("tcp", b.d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("SSH-2.0-scanner\r\n")); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "bytes that are not TLS counted", func() bool {
		return metricValue(t, ops, base, `mcpd_tls_handshake_errors_total{reason="not_tls"}`) == 1
	})
}
