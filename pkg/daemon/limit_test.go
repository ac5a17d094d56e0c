package daemon_test

import (
	"github.com/cyberos/mcpd/pkg/daemon"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestConnectionCap: past --max-connections, new clients wait (in the
// backlog, not refused) until a connection closes; idle keep-alive
// connections make room for them, so /readyz still answers.
func TestConnectionCap(t *testing.T) {
	cfg := devConfig()
	cfg.MaxConnections = 2
	d := start(t, cfg, daemon.Options{})
	addr := d.Addr()

	// Two connections that sent half a request hold both slots.
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	waiting := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := waiting.Get("http://" + addr + "/readyz"); err == nil {
		resp.Body.Close()
		t.Fatal("a third connection was served past the cap of 2")
	}

	// One slot frees: the next client is served.
	held[0].Close()
	answered := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := answered.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	held[1].Close()

	// Two keep-alive clients, idle after their call, hold the slots; a
	// health check still gets through.
	for range 2 {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read to the end: the connection stays open, idle
		resp.Body.Close()
	}
	resp, err = answered.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatalf("readyz with the slots held by idle connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %d", resp.StatusCode)
	}
}
