package daemon_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/client"
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
	tenant := uuid.New()
	tok, err := auth.Issue(secret, tenant, "test", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := c.Events(ctx, client.ListEventsParams{Cursor: "garbage"}); !errors.As(err, &prob) || prob.Status != http.StatusBadRequest {
		t.Fatalf("garbage cursor: %v, want 400", err)
	}
}
