package daemon_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// TestAdminListener: with --admin-listen, /healthz, /readyz and /metrics
// answer on their own listener while every API connection is taken by
// clients that trickle their headers (slowloris: /readyz waited behind
// them, up to 4.8 s), and nothing else is served there. A connection that
// trickles its headers to the admin listener is closed after
// ReadHeaderTimeout.
func TestAdminListener(t *testing.T) {
	cfg := devConfig()
	cfg.MaxConnections = 2
	cfg.AdminListen = "127.0.0.1:0"
	d := start(t, cfg, daemon.Options{ReadHeaderTimeout: 300 * time.Millisecond})
	if d.AdminAddr() == "" || d.AdminAddr() == d.Addr() {
		t.Fatalf("admin address %q, API %q: want a listener of its own", d.AdminAddr(), d.Addr())
	}

	// Two API connections that trickle their headers hold both slots.
	for range 2 {
		c, err := net.Dial("tcp", d.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")); err != nil {
			t.Fatal(err)
		}
	}
	probe := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := probe.Get("http://" + d.AdminAddr() + path)
		if err != nil {
			t.Fatalf("admin %s with the API's connections taken: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("admin %s: %d", path, resp.StatusCode)
		}
	}
	resp, err := probe.Get("http://" + d.AdminAddr() + "/v1/mcp/servers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the API on the admin listener: %d, want 404", resp.StatusCode)
	}

	// Headers trickled to the admin listener: closed by ReadHeaderTimeout.
	c, err := net.Dial("tcp", d.AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET /readyz HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.ReadAll(c)
		closed <- err
	}()
	testwait.Until(t, "the admin listener closes a connection that trickles its headers", 10*time.Second, func() bool {
		select {
		case err := <-closed:
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the trickling connection was not closed")
			}
			return true
		default:
			return false
		}
	})
}

// TestAdminListenOff: without --admin-listen there is no admin listener.
func TestAdminListenOff(t *testing.T) {
	d := start(t, devConfig(), daemon.Options{})
	if d.AdminAddr() != "" {
		t.Fatalf("admin address %q without --admin-listen", d.AdminAddr())
	}
}
