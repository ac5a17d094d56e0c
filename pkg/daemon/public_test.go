package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/daemon"
)

// mcpd --dev --registry-public-tenant: the demo token is the public
// tenant's, so what it registers is what a GET on /v0.1 without a token
// lists; /v1 and /metrics stay as they were (/v1 401, /metrics open, no
// CORS).
func TestDevPublicTenant(t *testing.T) {
	cfg := devConfig()
	public := uuid.New()
	cfg.RegistryPublicTenant = public.String()
	var out bytes.Buffer
	d := start(t, cfg, daemon.Options{Stdout: &out})
	m := regexp.MustCompile(`(?m)^  tenant +(\S+)\n  token +(\S+)$`).FindStringSubmatch(out.String())
	if m == nil || m[1] != public.String() {
		t.Fatalf("the banner's tenant: %q, want %s", out.String(), public)
	}
	if want := "  registry     http://" + d.Addr() + "/v0.1/servers (no token needed"; !bytes.Contains(out.Bytes(), []byte(want)) {
		t.Fatalf("the banner has no line %q:\n%s", want, out.String())
	}
	c := client.New("http://"+d.Addr(), m[2])
	defer c.CloseIdleConnections()
	ctx := context.Background()
	if _, _, err := c.Register(ctx, api.RegisterRequest{ModuleName: "calendar", Version: "1.3.2",
		SupportedProtocols: []string{"2025-06-18"}}, ""); err != nil {
		t.Fatal(err)
	}
	get := func(path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.Addr()+path, nil)
		req.Header.Set("Origin", "https://ide.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	resp := get("/v0.1/servers")
	var list struct {
		Servers []struct {
			Server struct {
				Name string `json:"name"`
			} `json:"server"`
		} `json:"servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK ||
		len(list.Servers) != 1 || list.Servers[0].Server.Name != "local.mcpd/calendar" ||
		resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("GET /v0.1/servers without a token: %d %+v %v", resp.StatusCode, list, err)
	}
	if resp := get("/v1/mcp/servers"); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("GET /v1/mcp/servers without a token: %d %v", resp.StatusCode, resp.Header)
	}
	for _, path := range []string{"/metrics", "/readyz"} {
		if resp := get(path); resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, resp.Header)
		}
	}
}
