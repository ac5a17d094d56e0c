package daemon_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/daemon"
)

// TestAnswerToAnUnreadRequestArrives: when mcpd answers a request it has
// not read to the end (a request line or headers past MaxHeaderBytes: 431;
// a body answered before it was read), the client reads the whole answer
// and then the end of the connection, never a reset. The HTTP server
// half-closes such a connection (CloseWrite) before it closes it, so that
// the client's unread bytes do not make the kernel reset it first; the
// connection limiter's wrapper hid CloseWrite, and a 70 KB URL got
// "connection reset by peer" (curl: 56) instead of its 431.
func TestAnswerToAnUnreadRequestArrives(t *testing.T) {
	t.Parallel()
	d := start(t, devConfig(), daemon.Options{})
	for _, c := range []struct {
		name    string
		request string
		code    int
	}{
		{"a 70 KB URL", "GET /healthz?x=" + strings.Repeat("a", 70<<10) + " HTTP/1.1\r\nHost: mcpd\r\n\r\n",
			http.StatusRequestHeaderFieldsTooLarge},
		{"a 70 KB API URL", "GET /v0.1/servers?search=" + strings.Repeat("a", 70<<10) + " HTTP/1.1\r\nHost: mcpd\r\n" +
			"Authorization: Bearer x\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"a 1 MiB body answered unread", "POST /v1/mcp/servers/register HTTP/1.1\r\nHost: mcpd\r\n" +
			"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(1<<20) + "\r\n\r\n" +
			strings.Repeat(" ", 1<<20), http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", d.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(pollCap)); err != nil {
				t.Fatal(err)
			}
			// Written aside: the server may stop reading before the end.
			go func() { _, _ = io.WriteString(conn, c.request) }()
			raw, err := io.ReadAll(conn)
			if err != nil {
				t.Fatalf("reading the answer: %v (after %d bytes: %.120q)", err, len(raw), raw)
			}
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
			if err != nil {
				t.Fatalf("answer %.200q: %v", raw, err)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("answer's body: %v", err)
			}
			if resp.StatusCode != c.code || len(body) == 0 {
				t.Fatalf("answer %d %q, want %d with a body", resp.StatusCode, body, c.code)
			}
		})
	}
}
