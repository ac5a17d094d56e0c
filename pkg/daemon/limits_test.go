package daemon_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/daemon"
)

// The tenant limits of the configuration reach the API: the quota of
// servers (403) and the request rate (429 with Retry-After), each counted
// in mcpd_limit_refusals_total.
func TestTenantLimitsWired(t *testing.T) {
	t.Parallel()
	secret := bytes.Repeat([]byte("w"), 32)
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := devConfig()
	cfg.AuthJWTSecretFile = secretFile
	cfg.TenantMaxServers = 1
	cfg.TenantRateLimit, cfg.TenantRateBurst = 0.01, 2
	d := start(t, cfg, daemon.Options{})
	tok, err := auth.Issue(secret, uuid.New(), "limits", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := &fairClient{http: &http.Client{Timeout: 5 * time.Second}, base: "http://" + d.Addr(), token: tok}
	c.register(t, "first")
	code, body, err := c.post(t.Context(), "/v1/mcp/servers/register", map[string]any{
		"module_name": "second", "version": "1.0.0", "supported_protocols": []string{"2025-06-18"}})
	if err != nil || code != http.StatusForbidden || !strings.Contains(string(body), "/quota-exceeded") {
		t.Fatalf("second module at a quota of 1: %d %s %v", code, body, err)
	}
	// The burst of 2 is spent: the next call is refused.
	req, _ := http.NewRequest(http.MethodGet, c.base+"/v1/mcp/servers", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past the burst: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp, err = http.Get(c.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var metrics bytes.Buffer
	if _, err := metrics.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`mcpd_limit_refusals_total{reason="quota"} 1`, `mcpd_limit_refusals_total{reason="rate"} 1`,
		`mcpd_limit_refusals_total{reason="watches"} 0`} {
		if !strings.Contains(metrics.String(), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}
