package api_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/registry"
)

// A registration's remotes, description and title come back in the server
// object and in skill discovery; a re-registration without them leaves
// "remotes": [] and no description or title.
func TestRegisterRemotes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"module_name":"calendar","version":"1.0.0","supported_protocols":["2025-06-18"],
		"skills":[{"name":"search"}],
		"remotes":[{"type":"streamable-http","url":"https://cal.example/mcp"},{"type":"sse","url":"http://cal.example/sse"}],
		"description":"The team calendar","title":"Calendar"}`
	resp := b.post(t, registerPath, body)
	if resp.code != http.StatusCreated {
		t.Fatalf("register: %d %s", resp.code, resp.body)
	}
	want := []registry.Remote{{Type: "streamable-http", URL: "https://cal.example/mcp"}, {Type: "sse", URL: "http://cal.example/sse"}}
	srv := decode[registry.Server](t, resp)
	if !reflect.DeepEqual(srv.Remotes, want) || srv.Description != "The team calendar" || srv.Title != "Calendar" {
		t.Fatalf("server %+v", srv)
	}
	dir := decode[apiwire.SkillDirectory](t, b.get(t, "/v1/mcp/skills?name=search"))
	if len(dir.Skills) != 1 || !reflect.DeepEqual(dir.Skills[0].Remotes, want) {
		t.Fatalf("skills %+v", dir.Skills)
	}

	resp = b.post(t, registerPath, registerBody("calendar", "search"))
	if resp.code != http.StatusOK {
		t.Fatalf("re-register: %d %s", resp.code, resp.body)
	}
	if !strings.Contains(string(resp.body), `"remotes":[]`) || strings.Contains(string(resp.body), `"description"`) {
		t.Fatalf("re-register without remotes: %s", resp.body)
	}
	if got := string(b.get(t, "/v1/mcp/skills").body); !strings.Contains(got, `"remotes":[]`) {
		t.Fatalf("skills after re-register: %s", got)
	}
}
