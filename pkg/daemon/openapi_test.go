package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
)

// docs/openapi.yaml describes the /v1 API; this test sends real requests
// to a dev mcpd and validates every answer (status, content type, body)
// against it, and fails for an operation of the document that it never
// saw succeed.

var openAPIFile = filepath.Join("..", "..", "docs", "openapi.yaml")

// openAPIURL is the name the document is known by to the schema compiler.
const openAPIURL = "file:///mcpd/openapi.json"

type openAPIDoc struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
	// seen holds "METHOD /path status" for every answer checked.
	seen map[string]bool
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	b, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	var y any
	if err := yaml.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", openAPIFile, err)
	}
	// Through JSON, so that the compiler gets JSON's types.
	j, err := json.Marshal(y)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIURL, doc); err != nil {
		t.Fatal(err)
	}
	o := &openAPIDoc{doc: doc.(map[string]any), compiler: c, schemas: map[string]*jsonschema.Schema{}, seen: map[string]bool{}}
	if v, _ := o.doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi %q, want 3.1.x (its schemas are JSON Schema 2020-12)", v)
	}
	// Every schema of the document compiles.
	for name := range o.object(t, "components", "schemas") {
		o.schema(t, "#/components/schemas/"+name)
	}
	return o
}

// object walks the document by keys and returns the object there.
func (o *openAPIDoc) object(t *testing.T, keys ...string) map[string]any {
	t.Helper()
	var cur any = o.doc
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	m, _ := cur.(map[string]any)
	return m
}

func (o *openAPIDoc) schema(t *testing.T, ptr string) *jsonschema.Schema {
	t.Helper()
	if s, ok := o.schemas[ptr]; ok {
		return s
	}
	s, err := o.compiler.Compile(openAPIURL + ptr)
	if err != nil {
		t.Fatalf("compile %s: %v", ptr, err)
	}
	o.schemas[ptr] = s
	return s
}

// escape makes a key a JSON pointer token.
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// check validates an answer to method on the path template against the
// document, and returns the pointer to the response's media type.
func (o *openAPIDoc) check(t *testing.T, method, path string, code int, header http.Header, body []byte) string {
	t.Helper()
	m := strings.ToLower(method)
	op := o.object(t, "paths", path, m)
	if op == nil {
		t.Fatalf("%s %s is not in %s", method, path, openAPIFile)
	}
	status := strconv.Itoa(code)
	resp, _ := op["responses"].(map[string]any)[status].(map[string]any)
	if resp == nil {
		t.Fatalf("%s %s answered %d, which %s does not document: %s", method, path, code, openAPIFile, body)
	}
	ptr := "#/paths/" + escape(path) + "/" + m + "/responses/" + status
	if ref, ok := resp["$ref"].(string); ok {
		ptr = ref
		resp = o.object(t, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
	}
	o.seen[method+" "+path+" "+status] = true
	content, _ := resp["content"].(map[string]any)
	media, _, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil {
		t.Fatalf("%s %s %d: Content-Type %q: %v", method, path, code, header.Get("Content-Type"), err)
	}
	if _, ok := content[media]; !ok {
		t.Fatalf("%s %s %d: Content-Type %s is not documented (%v)", method, path, code, media, keys(content))
	}
	for name := range mapOf(resp["headers"]) {
		if name != "WWW-Authenticate" && name != "Location" && name != "Retry-After" {
			continue
		}
		if header.Get(name) == "" {
			t.Errorf("%s %s %d: no %s header, which the document promises", method, path, code, name)
		}
	}
	mediaPtr := ptr + "/content/" + escape(media)
	if media == "application/json" || media == "application/problem+json" {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s %s %d: body is not JSON: %v\n%s", method, path, code, err, body)
		}
		if err := o.schema(t, mediaPtr+"/schema").Validate(v); err != nil {
			t.Errorf("%s %s %d: the body does not match %s: %v\n%s", method, path, code, openAPIFile, err, body)
		}
	}
	return mediaPtr
}

func mapOf(v any) map[string]any { m, _ := v.(map[string]any); return m }

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var tenantRE = regexp.MustCompile(`tenant\s+([0-9a-f-]{36})`)

// apiCaller sends requests to a dev mcpd and checks every answer.
type apiCaller struct {
	t     *testing.T
	o     *openAPIDoc
	base  string
	token string
	hc    *http.Client
}

// call sends a request (body nil: none) and checks the answer against the
// document under the path template; it returns the status and the body.
func (a *apiCaller) call(method, template, path, token, contentType string, body []byte) (int, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	a.o.check(a.t, method, template, resp.StatusCode, resp.Header, b)
	return resp.StatusCode, b
}

func (a *apiCaller) post(template, token string, body any) (int, []byte) {
	a.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		a.t.Fatal(err)
	}
	return a.call(http.MethodPost, template, template, token, "application/json", b)
}

func TestOpenAPIMatchesAnswers(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	cfg := devConfig()
	cfg.TenantMaxWatches = 1
	var stdout testlog.Buffer
	d := start(t, cfg, daemon.Options{Stdout: &stdout, Logger: slog.New(slog.NewJSONHandler(&testlog.Buffer{}, nil))})
	banner := stdout.String()
	tok, tenant, secretFile := tokenRE.FindStringSubmatch(banner), tenantRE.FindStringSubmatch(banner), secretRE.FindStringSubmatch(banner)
	if tok == nil || tenant == nil || secretFile == nil {
		t.Fatalf("banner without token, tenant or secret file:\n%s", banner)
	}
	secret, err := auth.ReadSecretFile(secretFile[1])
	if err != nil {
		t.Fatal(err)
	}
	readOnly, err := auth.Issue(secret, uuid.MustParse(tenant[1]), "openapi-test", "mcp:read", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	a := &apiCaller{t: t, o: o, base: "http://" + d.Addr(), token: tok[1], hc: hc}
	w := a.token

	// A watch opened before anything happens sees the registration.
	_, listBody := a.call("GET", "/v1/mcp/servers", "/v1/mcp/servers", w, "", nil)
	var list struct {
		WatchCursor string `json:"watch_cursor"`
	}
	if err := json.Unmarshal(listBody, &list); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/v1/mcp/watch?cursor="+list.WatchCursor, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w)
	watch, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Body.Close()
	mediaPtr := o.check(t, "GET", "/v1/mcp/watch", watch.StatusCode, watch.Header, nil)
	// A second watch is past --tenant-max-watches 1.
	a.call("GET", "/v1/mcp/watch", "/v1/mcp/watch", w, "", nil)

	reg := map[string]any{"module_name": "calendar", "version": "1.3.2", "supported_protocols": []string{"2025-06-18"},
		"capability_advertisement": map[string]any{"tools": map[string]any{"listChanged": true}},
		"skills":                   []map[string]string{{"name": "search", "description": "finds events"}}}
	if code, _ := a.post("/v1/mcp/servers/register", w, reg); code != http.StatusCreated {
		t.Fatalf("register: %d", code)
	}
	code, body := a.post("/v1/mcp/servers/register", w, reg)
	if code != http.StatusOK {
		t.Fatalf("register again: %d", code)
	}
	var srv struct {
		ServerID string `json:"server_id"`
	}
	if err := json.Unmarshal(body, &srv); err != nil {
		t.Fatal(err)
	}
	id := srv.ServerID

	// The event on the stream is an AuditEvent.
	sc := bufio.NewScanner(watch.Body)
	var data string
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = d
			break
		}
	}
	if data == "" {
		t.Fatalf("no event on the watch stream: %v", sc.Err())
	}
	ev, err := jsonschema.UnmarshalJSON(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.schema(t, mediaPtr+"/x-data-schema").Validate(ev); err != nil {
		t.Errorf("the watch event does not match the document: %v\n%s", err, data)
	}
	cancel()

	for _, c := range []struct{ template, path, token string }{
		{"/v1/mcp/servers", "/v1/mcp/servers?status=healthy&limit=10", w},
		{"/v1/mcp/servers/{server_id}", "/v1/mcp/servers/" + id, readOnly},
		{"/v1/mcp/servers/{server_id}/skills", "/v1/mcp/servers/" + id + "/skills", w},
		{"/v1/mcp/audit", "/v1/mcp/audit?module_name=calendar", w},
		{"/v1/mcp/skills", "/v1/mcp/skills?name=search&available=true&protocol=2025-06-18", w},
		{"/v1/mcp/servers/{server_id}/availability", "/v1/mcp/servers/" + id + "/availability?window=1h", readOnly},
		{"/v1/mcp/skills/{name}/availability", "/v1/mcp/skills/search/availability", w},
		{"/v1/mcp/availability", "/v1/mcp/availability?window=7d&server_ids=" + id + "," + uuid.NewString(), w},
		{"/healthz", "/healthz", ""},
		{"/readyz", "/readyz", ""},
		{"/metrics", "/metrics", ""},
		// Problems.
		{"/v1/mcp/servers", "/v1/mcp/servers", ""},
		{"/v1/mcp/servers", "/v1/mcp/servers?status=lost", w},
		{"/v1/mcp/servers/{server_id}", "/v1/mcp/servers/" + uuid.NewString(), w},
		{"/v1/mcp/servers/{server_id}", "/v1/mcp/servers/not-a-uuid", w},
		{"/v1/mcp/servers/{server_id}/skills", "/v1/mcp/servers/" + uuid.NewString() + "/skills", w},
		{"/v1/mcp/audit", "/v1/mcp/audit?kind=mcp.server.lost", w},
		{"/v1/mcp/audit", "/v1/mcp/audit?cursor=forged", w},
		{"/v1/mcp/skills", "/v1/mcp/skills?limit=0", w},
		{"/v1/mcp/servers/{server_id}/availability", "/v1/mcp/servers/" + id + "/availability?window=2h", w},
		{"/v1/mcp/servers/{server_id}/availability", "/v1/mcp/servers/" + uuid.NewString() + "/availability", w},
		{"/v1/mcp/skills/{name}/availability", "/v1/mcp/skills/nobody/availability", w},
		{"/v1/mcp/availability", "/v1/mcp/availability?server_ids=x", w},
		{"/v1/mcp/watch", "/v1/mcp/watch?cursor=forged", w},
	} {
		a.call("GET", c.template, c.path, c.token, "", nil)
	}
	a.post("/v1/mcp/servers/heartbeat", w, map[string]string{"server_id": id})
	a.post("/v1/mcp/servers/heartbeat", readOnly, map[string]string{"server_id": id})
	a.post("/v1/mcp/servers/heartbeat", w, map[string]string{"server_id": uuid.NewString()})
	a.post("/v1/mcp/servers/heartbeat", w, map[string]string{"server_id": id, "extra": "x"})
	a.call("POST", "/v1/mcp/servers/heartbeat", "/v1/mcp/servers/heartbeat", w, "text/plain", []byte(`{"server_id":"`+id+`"}`))
	a.call("POST", "/v1/mcp/servers/register", "/v1/mcp/servers/register", w, "application/json", []byte("{"))
	a.call("POST", "/v1/mcp/servers/register", "/v1/mcp/servers/register", w, "application/json",
		append(append([]byte(`{"module_name":"big","version":"1.0.0","supported_protocols":["2025-06-18"],"capability_advertisement":{"x":"`),
			bytes.Repeat([]byte("a"), 300<<10)...), `"}}`...))
	a.post("/v1/mcp/servers/register", w, map[string]any{"module_name": "Bad_Name", "version": "1", "supported_protocols": []string{}})
	a.post("/v1/mcp/servers/deregister", w, map[string]string{"server_id": id})
	a.post("/v1/mcp/servers/deregister", w, map[string]string{"server_id": uuid.NewString()})
	a.post("/v1/mcp/servers/heartbeat", w, map[string]string{"server_id": id})
	a.call("GET", "/v1/mcp/servers/{server_id}", "/v1/mcp/servers/"+id, w, "", nil)

	// Every operation of the document was seen succeeding, and the
	// problems above were each documented where they came.
	for path, item := range mapOf(o.doc["paths"]) {
		for method, op := range mapOf(item) {
			ok := false
			for status := range mapOf(mapOf(op)["responses"]) {
				if strings.HasPrefix(status, "2") && o.seen[strings.ToUpper(method)+" "+path+" "+status] {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s %s: no successful answer was checked", strings.ToUpper(method), path)
			}
		}
	}
	for _, want := range []string{
		"POST /v1/mcp/servers/register 201", "POST /v1/mcp/servers/register 200", "POST /v1/mcp/servers/register 400",
		"POST /v1/mcp/servers/register 413", "POST /v1/mcp/servers/heartbeat 403", "POST /v1/mcp/servers/heartbeat 404",
		"POST /v1/mcp/servers/heartbeat 409", "POST /v1/mcp/servers/heartbeat 415", "GET /v1/mcp/servers 401",
		"GET /v1/mcp/watch 429", "GET /v1/mcp/watch 400",
	} {
		if !o.seen[want] {
			t.Errorf("no answer %s was checked (seen: %v)", want, fmt.Sprint(len(o.seen)))
		}
	}
}
