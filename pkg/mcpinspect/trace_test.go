package mcpinspect

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
)

// seenRequest is what the server of TestPingCarriesTraceparent saw of one
// POST: its traceparent header, its method and its _meta.traceparent.
type seenRequest struct {
	header, method, meta string
}

// TestPingCarriesTraceparent: a probe made with WithTraceparent sends the
// traceparent header over HTTP on every revision, and on 2026-07-28 (the
// stateless transport) also in server/discover's _meta; without one,
// nothing is sent.
func TestPingCarriesTraceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		stateless bool
		protocol  string
		method    string
		meta      string
	}{
		{stateless: true, protocol: newProtocolRevision, method: methodDiscover, meta: tp},
		{stateless: false, protocol: "2025-11-25", method: "ping", meta: ""},
	} {
		t.Run(c.protocol, func(t *testing.T) {
			t.Parallel()
			var (
				mu   sync.Mutex
				seen []seenRequest
			)
			record := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost {
						body, _ := io.ReadAll(r.Body)
						r.Body = io.NopCloser(bytes.NewReader(body))
						var msg struct {
							Method string `json:"method"`
							Params struct {
								Meta map[string]any `json:"_meta"`
							} `json:"params"`
						}
						_ = json.Unmarshal(body, &msg)
						meta, _ := msg.Params.Meta["traceparent"].(string)
						mu.Lock()
						seen = append(seen, seenRequest{r.Header.Get("traceparent"), msg.Method, meta})
						mu.Unlock()
					}
					next.ServeHTTP(w, r)
				})
			}
			srv := mcptest.NewServer(mcptest.Config{Name: "calendar-server", Version: "1.0.0"})
			url := mcptest.ServeHTTP(t, srv, mcptest.HTTPOptions{Stateless: c.stateless, Wrap: record})
			s, err := Connect(ctxT(t, 10*time.Second), Target{URL: url}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Info().Protocol != c.protocol {
				t.Fatalf("protocol %s, want %s", s.Info().Protocol, c.protocol)
			}
			probe := func(ctxTP string) seenRequest {
				t.Helper()
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if err := s.Ping(WithTraceparent(ctxT(t, 5*time.Second), ctxTP)); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, r := range seen[n:] {
					if r.method == c.method {
						return r
					}
				}
				t.Fatalf("no %s request seen: %+v", c.method, seen[n:])
				return seenRequest{}
			}
			if got := probe(tp); got.header != tp || got.meta != c.meta {
				t.Fatalf("probe sent header %q _meta %q, want %q and %q", got.header, got.meta, tp, c.meta)
			}
			if got := probe(""); got.header != "" || got.meta != "" {
				t.Fatalf("probe without a traceparent sent header %q _meta %q", got.header, got.meta)
			}
		})
	}
}
