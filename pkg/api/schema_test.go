package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	v0 "github.com/modelcontextprotocol/registry/pkg/api/v0"
	"github.com/modelcontextprotocol/registry/pkg/model"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaURL is the $id of the vendored server.json schema (testdata/README.md).
const schemaURL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"

func serverSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/server.schema.2025-12-11.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// validateServers validates every ServerResponse.server of a /v0.1 answer
// (a list, or one ServerResponse) against the official schema, and reads
// the answer with the official registry's own Go types (its pkg/api/v0).
func validateServers(t *testing.T, sch *jsonschema.Schema, path string, body []byte) int {
	t.Helper()
	var raw struct {
		Servers []struct {
			Server json.RawMessage `json:"server"`
		} `json:"servers"`
		Server json.RawMessage `json:"server"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	servers := []json.RawMessage{}
	for _, s := range raw.Servers {
		servers = append(servers, s.Server)
	}
	if raw.Server != nil {
		servers = append(servers, raw.Server)
		var one v0.ServerResponse
		if err := json.Unmarshal(body, &one); err != nil || one.Server.Name == "" || one.Server.Schema != schemaURL {
			t.Fatalf("%s as the registry's v0.ServerResponse: %+v, %v", path, one.Server, err)
		}
		checkOfficial(t, path, one)
	} else {
		var list v0.ServerListResponse
		if err := json.Unmarshal(body, &list); err != nil || len(list.Servers) != len(servers) || list.Metadata.Count != len(servers) {
			t.Fatalf("%s as the registry's v0.ServerListResponse: %d servers, count %d, %v", path, len(list.Servers), list.Metadata.Count, err)
		}
		for i, s := range list.Servers {
			if s.Server.Name == "" || s.Server.Version == "" || s.Server.Description == "" || s.Server.Schema != schemaURL {
				t.Fatalf("%s: server %d as v0.ServerJSON: %+v", path, i, s.Server)
			}
			checkOfficial(t, path, s)
			for _, r := range s.Server.Remotes {
				if r.URL == "" || (r.Type != "streamable-http" && r.Type != "sse") {
					t.Fatalf("%s: remote %+v", path, r)
				}
			}
		}
	}
	for i, s := range servers {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(doc); err != nil {
			t.Fatalf("%s: server %d does not validate against server.schema.json 2025-12-11: %v\n%s", path, i, err, s)
		}
	}
	return len(servers)
}

// checkOfficial checks the official block as the registry's own type
// reads it: a status of its enum, the times set, isLatest.
func checkOfficial(t *testing.T, path string, s v0.ServerResponse) {
	t.Helper()
	o := s.Meta.Official
	if o == nil || (o.Status != model.StatusActive && o.Status != model.StatusDeleted) ||
		o.PublishedAt.IsZero() || o.UpdatedAt.IsZero() || o.UpdatedAt.Before(o.PublishedAt) || !o.IsLatest {
		t.Fatalf("%s: %s's official block as v0.RegistryExtensions: %+v", path, s.Server.Name, o)
	}
}

// Every server mcpd's /v0.1 answers hold validates against the official
// server.json schema of 2025-12-11, whatever was registered within the
// contract's rules and whatever its status; the answers read as the
// official registry's Go types.
func TestRegistryAnswersValidate(t *testing.T) {
	t.Parallel()
	sch := serverSchema(t)
	// The schema is not lenient: a name without the namespace fails.
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"name":"calendar","description":"d","version":"1.0.0"}`))
	if sch.Validate(bad) == nil {
		t.Fatal("a name without its namespace validates: the schema is not the official one")
	}

	b := setup(t)
	for _, body := range []string{
		`{"module_name":"a","version":"0.0.1","supported_protocols":["2024-11-05"]}`,
		`{"module_name":"calendar","version":"2.0.0-rc.1+build.7","supported_protocols":["2025-06-18","2025-11-25"],
		  "skills":[{"name":"search"},{"name":"book","description":"Book a slot"}],
		  "remotes":[{"type":"streamable-http","url":"https://cal.example:8443/mcp?tenant=a&x=%20"},
		             {"type":"sse","url":"http://10.0.0.7/sse"}],
		  "description":"` + strings.Repeat("é", 100) + `","title":"` + strings.Repeat("T", 100) + `"}`,
		`{"module_name":"` + "m" + strings.Repeat("0-", 31) + `","version":"1.0.0","supported_protocols":["2026-07-28"],
		  "remotes":[{"type":"streamable-http","url":"http://[::1]:3000/mcp"}],"title":"日本語のタイトル"}`,
		`{"module_name":"dying","version":"1.0.0","supported_protocols":["2025-06-18"],"skills":[{"name":"x"}]}`,
		`{"module_name":"gone","version":"1.0.0","supported_protocols":["2025-06-18"]}`,
	} {
		if resp := b.post(t, registerPath, body); resp.code != http.StatusCreated {
			t.Fatalf("register: %d %s", resp.code, resp.body)
		}
	}
	gone := decode[struct {
		ID string `json:"server_id"`
	}](t, b.post(t, registerPath, `{"module_name":"gone","version":"1.0.0","supported_protocols":["2025-06-18"]}`))
	b.post(t, "/v1/mcp/servers/deregister", `{"server_id":"`+gone.ID+`"}`)
	b.sweep(t, 35*time.Second) // everything unhealthy
	b.register(t, "a")         // healthy again

	checked := 0
	paths := []string{
		"/v0.1/servers", "/v0.1/servers?include_deleted=true", "/v0.1/servers?limit=1&include_deleted=true",
		"/v0.1/servers?updated_since=" + url.QueryEscape("2000-01-01T00:00:00Z"),
		"/v0.1/servers/local.mcpd%2Fcalendar/versions?include_deleted=true",
		"/v0.1/servers/local.mcpd%2Fcalendar/versions/latest?include_deleted=true",
		"/v0.1/servers/local.mcpd%2Fgone/versions/1.0.0?include_deleted=true",
		"/v0.1/servers/local.mcpd%2Fa/versions/1.3.2",
	}
	for _, path := range paths {
		resp := b.get(t, path)
		if resp.code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.code, resp.body)
		}
		checked += validateServers(t, sch, path, resp.body)
	}
	if checked < 15 {
		t.Fatalf("validated %d servers, want every answer's", checked)
	}
}
