package daemon_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
)

// mcpd --dev with a secret file of the operator's: a cursor of the
// previous process (its memory trail gone with it) is 410, so that a client
// lists again, not 400 as for a cursor that is no position at all.
func TestDevCursorAcrossRestartExpires(t *testing.T) {
	secret := []byte(strings.Repeat("dev-secret-", 4))
	file := filepath.Join(t.TempDir(), "jwt.secret")
	if err := os.WriteFile(file, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := devConfig()
	cfg.AuthJWTSecretFile = file
	tok, err := auth.Issue(secret, uuid.New(), "test", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	devCursorAcrossRestart(t, cfg, tok)
}

// The same with the operator's JWKS and no secret file: tokens signed by
// the operator's key outlive the restart, so cursors must too (they were
// sealed under a random key and answered 400).
func TestDevCursorAcrossRestartExpiresJWKS(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	jwks := `{"keys":[{"kty":"OKP","crv":"Ed25519","use":"sig","alg":"EdDSA","kid":"k1","x":"` +
		base64.RawURLEncoding.EncodeToString(pub) + `"}]}`
	if err := os.WriteFile(file, []byte(jwks), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := devConfig()
	cfg.AuthJWKSFile = file
	now := time.Now()
	token := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"tenant_id": uuid.NewString(), "sub": "test", "scope": "mcp:read mcp:write",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	token.Header["kid"] = "k1"
	tok, err := token.SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	devCursorAcrossRestart(t, cfg, tok)
}

func devCursorAcrossRestart(t *testing.T, cfg config.Config, tok string) {
	t.Helper()
	ctx := context.Background()
	first, err := daemon.New(cfg, daemon.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := client.New("http://"+first.Addr(), tok)
	if _, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "alpha", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}}, ""); err != nil {
		t.Fatal(err)
	}
	list, err := c.Events(ctx, client.ListEventsParams{})
	if err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	second := start(t, cfg, daemon.Options{})
	c = client.New("http://"+second.Addr(), tok)
	defer c.CloseIdleConnections()
	_, err = c.Events(ctx, client.ListEventsParams{Cursor: list.WatchCursor})
	var prob *api.Problem
	if !errors.As(err, &prob) || prob.Status != http.StatusGone || !strings.HasSuffix(prob.Type, "/cursor-expired") {
		t.Fatalf("the previous process's cursor: %v, want 410 cursor-expired", err)
	}
	// The watch answers the same, by its query and by Last-Event-ID.
	for _, h := range []struct{ query, lastEventID string }{{"?cursor=" + list.WatchCursor, ""}, {"", list.WatchCursor}} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+second.Addr()+"/v1/mcp/watch"+h.query, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if h.lastEventID != "" {
			req.Header.Set("Last-Event-ID", h.lastEventID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusGone {
			t.Fatalf("watch%s (Last-Event-ID %t) with the previous process's cursor: %d, want 410", h.query, h.lastEventID != "", resp.StatusCode)
		}
	}
	if _, err := c.Events(ctx, client.ListEventsParams{Cursor: "garbage"}); !errors.As(err, &prob) || prob.Status != http.StatusBadRequest {
		t.Fatalf("garbage cursor: %v, want 400", err)
	}
}
