package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	v0 "github.com/modelcontextprotocol/registry/pkg/api/v0"
)

// dockerResolveRegistry replays Docker's catalog import of a registry
// reference ("docker mcp catalog server add CATALOG --server URL",
// docker/mcp-gateway 2bd20fe: pkg/registryapi/url.go ParseServerURL,
// pkg/registryapi/client.go GetServerVersions, pkg/workingset/workingset.go
// ResolveRegistry and resolveLatestVersion): from
// {base}/{apiVersion}/servers/{name}/versions/latest it GETs
// {base}/{apiVersion}/servers/{name}/versions without a token, decodes a
// v0.ServerListResponse, takes the entry whose official block says
// isLatest, and imports its server.json (here: its first remote). Any
// status but 200 is "unexpected status code".
func dockerResolveRegistry(rawURL string) (name, version, remote string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", "", err
	}
	parts := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	base := u.Scheme + "://" + u.Host
	i := 0
	for ; i < len(parts)-1; i++ {
		if strings.HasPrefix(parts[i], "v") && len(parts[i]) > 1 && parts[i+1] == "servers" {
			break
		}
		base += "/" + parts[i]
	}
	if i+2 >= len(parts) {
		return "", "", "", fmt.Errorf("invalid registry URL: could not find API version and server name")
	}
	versionsURL := fmt.Sprintf("%s/%s/servers/%s/versions", base, parts[i], parts[i+2])
	resp, err := http.Get(versionsURL)
	if err != nil {
		return "", "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", "", fmt.Errorf("failed to get server versions from URL %s: unexpected status code: %d", versionsURL, resp.StatusCode)
	}
	var versions v0.ServerListResponse
	if err := json.NewDecoder(resp.Body).Decode(&versions); err != nil {
		return "", "", "", fmt.Errorf("failed to unmarshal response: %w", err)
	}
	for _, v := range versions.Servers {
		if v.Meta.Official != nil && v.Meta.Official.IsLatest {
			if len(v.Server.Remotes) == 0 {
				return "", "", "", fmt.Errorf("no compatible package type")
			}
			return v.Server.Name, v.Server.Version, v.Server.Remotes[0].URL, nil
		}
	}
	return "", "", "", fmt.Errorf("no latest version found")
}

// Docker's catalog import reads a live server of mcpd through the public
// tenant (the official block's isLatest picks the version); once the
// server is dead, its import fails with the 404.
func TestDockerCatalogImport(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{public: true})
	srv := httptest.NewServer(b.handler)
	defer srv.Close()
	resp := b.post(t, registerPath, `{"module_name":"calendar","version":"1.3.2","supported_protocols":["2025-06-18"],
		"remotes":[{"type":"streamable-http","url":"https://calendar.internal.example/mcp"}]}`)
	if resp.code != http.StatusCreated {
		t.Fatalf("register: %d %s", resp.code, resp.body)
	}
	ref := srv.URL + "/v0.1/servers/local.mcpd%2Fcalendar/versions/latest"
	name, version, remote, err := dockerResolveRegistry(ref)
	if err != nil || name != "local.mcpd/calendar" || version != "1.3.2" || remote != "https://calendar.internal.example/mcp" {
		t.Fatalf("Docker's import of %s: %q %q %q, %v", ref, name, version, remote, err)
	}
	b.sweep(t, 35*testInterval/10) // silent for 35 s: unhealthy
	if _, _, _, err := dockerResolveRegistry(ref); err == nil || !strings.Contains(err.Error(), "unexpected status code: 404") {
		t.Fatalf("Docker's import of a dead server: %v, want its 404", err)
	}
}
