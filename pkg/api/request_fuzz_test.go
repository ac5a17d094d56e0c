package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/registry"
)

// readBundle is one handler with a few servers and events, shared by the
// fuzz targets that only read (their iterations change nothing).
var (
	readOnce   sync.Once
	readShared *bundle
)

func sharedReadBundle(t *testing.T) *bundle {
	readOnce.Do(func() {
		b := setup(t)
		for _, m := range []string{"alpha", "beta", "gamma"} {
			srv := b.register(t, m, "s1", "s2")
			b.post(t, "/v1/mcp/servers/heartbeat", `{"server_id":"`+srv.ServerID.String()+`"}`)
		}
		readShared = b
	})
	return readShared
}

// FuzzListQueries: no query string makes a listing answer anything but 200
// with at most limit items, or 400 naming one of its parameters.
func FuzzListQueries(f *testing.F) {
	for _, q := range []string{
		"", "limit=1", "limit=1000", "limit=1001", "limit=0", "limit=-1", "limit=1e3", "limit=99999999999999999999",
		"status=healthy", "status=HEALTHY", "status=", "status=healthy&status=degraded", "module_name=alpha",
		"module_name=Alpha", "module_name=" + strings.Repeat("a", 64), "cursor=", "cursor=e30", "cursor=%zz", "cursor=%00",
		"server_id=" + uuid.NewString(), "server_id=x", "kind=mcp.server.registered", "kind=registered", "a=b&&&=&",
		"limit=2&cursor=eyJrIjoicyIsIm0iOiJhbHBoYSIsImkiOiIwMDAwMDAwMC0wMDAwLTAwMDAtMDAwMC0wMDAwMDAwMDAwMDAifQ",
		"limit=2&cursor=eyJrIjoiZSIsInEiOjF9", ";;", "%", "limit=%31",
	} {
		f.Add(q)
	}
	fields := map[string]bool{"status": true, "module_name": true, "limit": true, "cursor": true, "server_id": true, "kind": true}
	f.Fuzz(func(t *testing.T, query string) {
		b := sharedReadBundle(t)
		for _, path := range []string{"/v1/mcp/servers", "/v1/mcp/audit"} {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.URL.RawQuery = query
			r.Header.Set("Authorization", "Bearer "+b.token)
			rec := httptest.NewRecorder()
			b.handler.ServeHTTP(rec, r)
			resp := response{code: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			switch resp.code {
			case http.StatusOK:
				var page struct {
					Servers    []json.RawMessage `json:"servers"`
					Events     []json.RawMessage `json:"events"`
					NextCursor *string           `json:"next_cursor"`
				}
				if err := json.Unmarshal(resp.body, &page); err != nil {
					t.Fatalf("%s?%s: 200 with %s", path, query, resp.body)
				}
				if n := len(page.Servers) + len(page.Events); n > registry.MaxPageLimit {
					t.Fatalf("%s?%s: %d items", path, query, n)
				}
			case http.StatusBadRequest:
				p := wantProblem(t, resp, http.StatusBadRequest, "")
				// A filter of the list, or the parameter of the query that
				// does not parse or is given twice, as the caller wrote it.
				given, _ := url.ParseQuery(query)
				_, named := given[p.Field]
				if !fields[p.Field] && !named && !strings.Contains(query, p.Field) && p.Field != "query" {
					t.Fatalf("%s?%s: 400 naming %q: %s", path, query, p.Field, resp.body)
				}
			default:
				t.Fatalf("%s?%s: %d %s", path, query, resp.code, resp.body)
			}
		}
	})
}

// FuzzRegisterFields: a registration is accepted exactly when its fields
// keep the contract's rules (registry.ServerInfo.Validate) and hold text
// that PostgreSQL can store (no NUL, valid UTF-8); otherwise it is a 400
// naming a field. Never a 5xx.
func FuzzRegisterFields(f *testing.F) {
	f.Add("calendar", "1.3.2", "2025-06-18", "search", "find events", `{"tools":{"listChanged":true}}`)
	f.Add("Calendar", "1.2", "latest", "", "", `[1]`)
	f.Add("a", "0.0.0-rc.1+b", "2099-12-31", "s\x00", "", `{"a":"\u0000"}`)
	f.Add("mail", "1.0.0", "2025-02-30", "x", "d\x00", `{"\\u0000":1}`)
	f.Add("mail", "01.0.0", "2024-11-05", strings.Repeat("n", 129), "\xff", "{\"a\":\"\xff\"}")
	f.Add("z-9", "1.0.0", "2026-07-28", "日本", "✓", `null`)
	f.Add("mail", "1.0.0", "2025-06-18", "s", "d", `{"a":"\ud800","b":"\ud83d\ude00"}`)
	f.Fuzz(func(t *testing.T, module, version, protocol, skill, desc, caps string) {
		req := api.RegisterRequest{ModuleName: module, Version: version, SupportedProtocols: []string{protocol},
			Skills: []registry.SkillInfo{{Name: skill, Description: desc}}}
		if json.Valid([]byte(caps)) {
			req.CapabilityAdvertisement = json.RawMessage(caps)
		}
		body, err := json.Marshal(req)
		if err != nil {
			return // a RawMessage json.Marshal refuses
		}
		// What the handler decodes: the same bytes through the same decoder.
		var dec api.RegisterRequest
		if err := json.Unmarshal(body, &dec); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		info := registry.ServerInfo{ModuleName: dec.ModuleName, Version: dec.Version, SupportedProtocols: dec.SupportedProtocols,
			CapabilityAdvertisement: dec.CapabilityAdvertisement, Skills: dec.Skills}
		accept := info.Validate() == nil && storable(info)
		// A surrogate escape may be half of a pair or alone (refused): this
		// oracle does not tell them apart, TestBodyUnicode does.
		unsure := surrogateEscape.Match(body)

		b := setup(t)
		resp := b.post(t, registerPath, string(body))
		switch {
		case resp.code >= 500:
			t.Fatalf("%s: %d %s", body, resp.code, resp.body)
		case unsure && resp.code == http.StatusCreated:
		case accept && !unsure && resp.code != http.StatusCreated:
			t.Fatalf("%s: %d %s, want 201", body, resp.code, resp.body)
		case !accept || resp.code != http.StatusCreated:
			if p := wantProblem(t, resp, http.StatusBadRequest, ""); p.Field == "" {
				t.Fatalf("%s: 400 naming no field: %s", body, resp.body)
			}
		}
	})
}

// surrogateEscape matches a \u escape of a UTF-16 surrogate (or the text
// of one after an escaped backslash).
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// storable is the rule of text PostgreSQL can store, written independently
// of the handler's: no NUL anywhere in a skill or in the capability
// advertisement's keys and strings, and the advertisement valid UTF-8.
func storable(info registry.ServerInfo) bool {
	for _, s := range info.Skills {
		if strings.ContainsRune(s.Name, 0) || strings.ContainsRune(s.Description, 0) {
			return false
		}
	}
	c := info.CapabilityAdvertisement
	if len(c) == 0 {
		return true
	}
	if !utf8.Valid(c) {
		return false
	}
	var v any
	if err := json.Unmarshal(c, &v); err != nil {
		return true // refused by Validate already
	}
	return !holdsNUL(v)
}

func holdsNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, 0)
	case []any:
		for _, e := range x {
			if holdsNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.ContainsRune(k, 0) || holdsNUL(e) {
				return true
			}
		}
	}
	return false
}

// FuzzAuthorization: no Authorization header makes a call answer anything
// but 200 (the valid token only), 401 with WWW-Authenticate or 403, and no
// answer repeats the token it was given.
func FuzzAuthorization(f *testing.F) {
	f.Add("Bearer ")
	f.Add("bearer a.b.c")
	f.Add("Basic dXNlcjpwYXNz")
	f.Add("Bearer eyJhbGciOiJub25lIn0.eyJ0ZW5hbnRfaWQiOiIwYjZlNGYzYS04YzFkLTRmMmUtOWE3Yi0zYzVkNmU3ZjhhOWIifQ.")
	f.Add("Bearer eyJhbGciOiJIUzI1NiIsImtpZCI6IjxzY3JpcHQ-In0.e30.sig")
	f.Add("Bearer  a  b")
	f.Add(strings.Repeat("Bearer ", 100))
	f.Fuzz(func(t *testing.T, header string) {
		b := sharedReadBundle(t)
		if strings.Contains(header, b.token) {
			return // the valid token, perhaps with something around it
		}
		r := httptest.NewRequest(http.MethodGet, "/v1/mcp/servers", nil)
		r.Header.Set("Authorization", header)
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, r)
		switch rec.Code {
		case http.StatusUnauthorized:
			if !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%q: 401 without WWW-Authenticate", header)
			}
		case http.StatusForbidden:
		default:
			t.Fatalf("%q: %d %s", header, rec.Code, rec.Body.String())
		}
		if tok := strings.TrimSpace(header); len(tok) >= 16 && strings.Contains(rec.Body.String(), tok) {
			t.Fatalf("the answer repeats the token: %s", rec.Body.String())
		}
		for _, part := range strings.Split(strings.TrimSpace(strings.TrimPrefix(header, "Bearer")), ".") {
			if len(part) >= 16 && strings.Contains(rec.Body.String(), part) {
				t.Fatalf("the answer repeats a part of the token (%q): %s", part, rec.Body.String())
			}
		}
	})
}
