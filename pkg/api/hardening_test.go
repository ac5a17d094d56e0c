package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/memstore"
)

// TestJSONAnswersNosniff: every answer of /v1, the probes included,
// carries X-Content-Type-Options: nosniff, so that no browser reads a
// JSON answer (which may hold registry text) as anything else.
func TestJSONAnswersNosniff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := b.post(t, registerPath, registerBody("nosniff", "search"))
	if reg.code != http.StatusCreated {
		t.Fatalf("register: %d %s", reg.code, reg.body)
	}
	var srv struct {
		ServerID string `json:"server_id"`
	}
	if err := json.Unmarshal(reg.body, &srv); err != nil {
		t.Fatal(err)
	}
	for what, r := range map[string]response{
		"register":  reg,
		"heartbeat": b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+srv.ServerID+`"}`),
		"list":      b.get(t, "/v1/mcp/servers"),
		"server":    b.get(t, "/v1/mcp/servers/"+srv.ServerID),
		"skills":    b.get(t, "/v1/mcp/servers/"+srv.ServerID+"/skills"),
		"find":      b.get(t, "/v1/mcp/skills?name=search"),
		"audit":     b.get(t, "/v1/mcp/audit"),
		"healthz":   b.get(t, "/healthz"),
		"readyz":    b.get(t, "/readyz"),
		"problem":   b.get(t, "/v1/mcp/servers/"+uuid.NewString()),
	} {
		if r.code >= 500 || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d, X-Content-Type-Options %q", what, r.code, r.header.Get("X-Content-Type-Options"))
		}
	}
}

// TestWatchEndsAtTokenExpiry: the server ends a watch stream when the
// token that opened it expires, not before; the client resumes from its
// last id with a fresh token.
func TestWatchEndsAtTokenExpiry(t *testing.T) {
	t.Parallel()
	tokens := clockwork.NewFakeClockAt(time.Now())
	store := memstore.New(clockwork.NewFakeClock())
	secret := []byte(strings.Repeat("k", 32))
	verifier, err := auth.NewVerifier(auth.VerifierOptions{HMACSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	hub := feed.NewHub(feed.Options{Source: store, BookmarkInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	defer func() { cancel(); <-done }()
	srv := httptest.NewServer(api.NewHandler(api.HandlerOptions{Registrar: lifecycle.NewRegistrar(lifecycle.RegistrarOptions{Store: store}),
		Verifier: verifier, Feed: hub, Streams: ctx, TokenClock: tokens}))
	defer srv.Close()
	tenant := uuid.New()
	// Issued at the token clock's time: issued at the wall clock's, a
	// second that turned since the fake clock was made put the expiry
	// past the ten minutes the test advances (exp is whole seconds).
	tok, err := auth.Issue(secret, tenant, "board", "mcp:read", 10*time.Minute, tokens.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/mcp/watch", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	if err := tokens.BlockUntilContext(wctx, 1); err != nil {
		t.Fatalf("no expiry timer: %v", err)
	}
	tokens.Advance(10*time.Minute - time.Second)
	select {
	case <-ended:
		t.Fatal("the stream ended before its token expired")
	case <-time.After(100 * time.Millisecond):
	}
	tokens.Advance(time.Second)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch outlived its token")
	}
	_, _ = io.Copy(io.Discard, resp.Body)
}
