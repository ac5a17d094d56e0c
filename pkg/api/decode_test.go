package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cyberos/mcpd/pkg/api"
)

// TestBodyStrictNames: member names match the contract exactly, each at
// most once. encoding/json alone matched "MODULE_NAME" and "Module_Name" to
// module_name, the last one winning, and took a duplicate name's last
// value (found by a black-box attack).
func TestBodyStrictNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.register(t, "calendar").ServerID.String()
	const rest = `"version":"1.0.0","supported_protocols":["2025-06-18"]`
	cases := []struct {
		name, path, body, field, detail string
	}{
		{"upper-case name alone", registerPath, `{"MODULE_NAME":"mail",` + rest + `}`, "MODULE_NAME", "unknown field"},
		{"upper-case name after", registerPath, `{"module_name":"mail","MODULE_NAME":"other",` + rest + `}`, "MODULE_NAME", "unknown field"},
		{"mixed-case name after", registerPath, `{"module_name":"mail",` + rest + `,"Module_Name":"other"}`, "Module_Name", "unknown field"},
		{"mixed-case name before", registerPath, `{"Module_Name":"other","module_name":"mail",` + rest + `}`, "Module_Name", "unknown field"},
		{"long s", registerPath, `{"module_name":"mail",` + rest + `,"ſkills":[]}`, "ſkills", "unknown field"},
		{"duplicate name", registerPath, `{"module_name":"mail","module_name":"other",` + rest + `}`, "module_name", "appears more than once"},
		{"duplicate escaped name", registerPath, `{"module_name":"mail","module\u005fname":"other",` + rest + `}`, "module_name", "appears more than once"},
		{"duplicate null", registerPath, `{"module_name":"mail",` + rest + `,"skills":null,"skills":[]}`, "skills", "appears more than once"},
		{"skill name upper-case", registerPath, `{"module_name":"mail",` + rest + `,"skills":[{"NAME":"a"}]}`, "NAME", "unknown field"},
		{"skill name twice", registerPath, `{"module_name":"mail",` + rest + `,"skills":[{"name":"a"},{"name":"b","name":"c"}]}`, "skills[1].name", "appears more than once"},
		{"skill description twice", registerPath, `{"module_name":"mail",` + rest + `,"skills":[{"name":"a","description":"x","description":"y"}]}`, "skills[0].description", "appears more than once"},
		{"heartbeat upper-case", "/v1/mcp/servers/heartbeat", `{"SERVER_ID":"` + id + `"}`, "SERVER_ID", "unknown field"},
		{"heartbeat twice", "/v1/mcp/servers/heartbeat", `{"server_id":"` + id + `","server_id":"` + id + `"}`, "server_id", "appears more than once"},
		{"deregister mixed-case", "/v1/mcp/servers/deregister", `{"server_id":"` + id + `","Server_Id":"x"}`, "Server_Id", "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := wantProblem(t, b.post(t, c.path, c.body), http.StatusBadRequest, c.field)
			if p.Type != api.ProblemValidation || p.Detail != c.field+": "+c.detail {
				t.Fatalf("problem %+v, want a validation problem %q", p, c.field+": "+c.detail)
			}
		})
	}
	// Nothing of the refused bodies was registered or deregistered.
	resp := b.get(t, "/v1/mcp/servers")
	if resp.code != http.StatusOK || strings.Contains(string(resp.body), `"mail"`) || strings.Contains(string(resp.body), `"status":"deregistered"`) {
		t.Fatalf("after refused bodies: %d %s", resp.code, resp.body)
	}
	t.Run("capability advertisement is free-form", func(t *testing.T) {
		resp := b.post(t, registerPath, `{"module_name":"free",`+rest+
			`,"capability_advertisement":{"Tools":{},"tools":{},"x":1,"X":2,"MODULE_NAME":"y","a":{"x":1},"b":[{"x":1},{"x":2}]}}`)
		if resp.code != http.StatusCreated {
			t.Fatalf("%d %s", resp.code, resp.body)
		}
	})
	// A key twice in one object of the advertisement, at any depth, is
	// refused: PostgreSQL kept the last, --dev both.
	for name, adv := range map[string]string{
		"top":     `{"a":1,"a":2}`,
		"escaped": `{"a":1,"\u0061":2}`,
		"nested":  `{"tools":{"x":{"a":1,"b":2,"a":3}}}`,
		"in list": `{"l":[1,{"k":{},"k":null}]}`,
	} {
		t.Run("capability advertisement duplicate "+name, func(t *testing.T) {
			p := wantProblem(t, b.post(t, registerPath, `{"module_name":"dup",`+rest+`,"capability_advertisement":`+adv+`}`),
				http.StatusBadRequest, "capability_advertisement")
			if !strings.Contains(p.Detail, "appears more than once") {
				t.Fatalf("problem %+v", p)
			}
		})
	}
}

// TestBodyUnicode: every string of a body, member names included, must be
// valid UTF-8 without lone surrogate escapes; anything else is a 400 naming
// the field. encoding/json replaces both with U+FFFD: a skill name was
// stored changed, and a lone surrogate in capability_advertisement was a
// 500 on PostgreSQL (jsonb refuses it).
func TestBodyUnicode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.register(t, "calendar").ServerID.String()
	reg := func(module, version, protocol, skills, caps string) string {
		body := `{"module_name":"` + module + `","version":"` + version + `","supported_protocols":["2025-06-18","` + protocol + `"]`
		if skills != "" {
			body += `,"skills":[{"name":"ok"},` + skills + `]`
		}
		if caps != "" {
			body += `,"capability_advertisement":` + caps
		}
		return body + `}`
	}
	const (
		m, v, p = "mail", "1.0.0", "2025-06-18"
		caps    = "capability_advertisement"
	)
	cases := []struct {
		name, path, body, field string
	}{
		{"lone high surrogate in capabilities", registerPath, reg(m, v, p, "", `{"a":"\ud800"}`), caps},
		{"lone low surrogate in capabilities", registerPath, reg(m, v, p, "", `{"a":["x","\udc00"]}`), caps},
		{"high surrogate then a letter", registerPath, reg(m, v, p, "", `{"a":"\ud800\u0041"}`), caps},
		{"high surrogate then a high one", registerPath, reg(m, v, p, "", `{"a":"\ud800\ud800"}`), caps},
		{"surrogates reversed", registerPath, reg(m, v, p, "", `{"a":"\udc00\ud800"}`), caps},
		{"high surrogate at the end", registerPath, reg(m, v, p, "", `{"a":"x\uD83D"}`), caps},
		{"lone surrogate in a capability key", registerPath, reg(m, v, p, "", `{"\ud800":1}`), caps},
		{"lone surrogate deep", registerPath, reg(m, v, p, "", `{"a":{"b":[{"c":["\udfff"]}]}}`), caps},
		{"bad utf-8 in capabilities", registerPath, reg(m, v, p, "", "{\"a\":\"\xff\"}"), caps},
		{"bad utf-8 in a capability key", registerPath, reg(m, v, p, "", "{\"\xc3\":1}"), caps},
		{"lone surrogate in module_name", registerPath, reg(`m\ud800`, v, p, "", ""), "module_name"},
		{"bad utf-8 in module_name", registerPath, reg("m\xff", v, p, "", ""), "module_name"},
		{"lone surrogate in version", registerPath, reg(m, `1.0.0-\ud800`, p, "", ""), "version"},
		{"bad utf-8 in version", registerPath, reg(m, "1.0.0-\xe2\x82", p, "", ""), "version"},
		{"lone surrogate in a protocol", registerPath, reg(m, v, `\ud800`, "", ""), "supported_protocols"},
		{"bad utf-8 in a protocol", registerPath, reg(m, v, "2025-06-18\x80", "", ""), "supported_protocols"},
		{"lone surrogate in a skill name", registerPath, reg(m, v, p, `{"name":"s\ud800"}`, ""), "skills[1].name"},
		{"bad utf-8 in a skill name", registerPath, reg(m, v, p, "{\"name\":\"s\xff\"}", ""), "skills[1].name"},
		{"overlong utf-8 in a skill name", registerPath, reg(m, v, p, "{\"name\":\"\xc0\xaf\"}", ""), "skills[1].name"},
		{"utf-8 encoded surrogate in a skill name", registerPath, reg(m, v, p, "{\"name\":\"\xed\xa0\x80\"}", ""), "skills[1].name"},
		{"lone surrogate in a skill description", registerPath, reg(m, v, p, `{"name":"s","description":"\udbff"}`, ""), "skills[1].description"},
		{"bad utf-8 in a skill description", registerPath, reg(m, v, p, "{\"name\":\"s\",\"description\":\"\xfe\"}", ""), "skills[1].description"},
		{"lone surrogate in server_id", "/v1/mcp/servers/heartbeat", `{"server_id":"` + id[:35] + `\ud800"}`, "server_id"},
		{"bad utf-8 in server_id", "/v1/mcp/servers/deregister", "{\"server_id\":\"" + id[:35] + "\xff\"}", "server_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := wantProblem(t, b.post(t, c.path, c.body), http.StatusBadRequest, c.field)
			if p.Type != api.ProblemValidation {
				t.Fatalf("problem type %q, want %q", p.Type, api.ProblemValidation)
			}
		})
	}
	t.Run("a lone surrogate in an unknown member's name", func(t *testing.T) {
		resp := b.post(t, registerPath, `{"module_name":"mail","x\ud800":1}`)
		p := wantProblem(t, resp, http.StatusBadRequest, "")
		if p.Detail != "x\uFFFD: unknown field" {
			t.Fatalf("detail %q", p.Detail)
		}
	})
	t.Run("valid text is accepted and kept", func(t *testing.T) {
		body := reg("emoji", v, p, `{"name":"s\ud83d\ude00","description":"\\ud800 \u00e9 é 😀"}`,
			`{"a":"\ud83d\ude00","\\ud800":"\\\\ud800","b":"\u00e9"}`)
		resp := b.post(t, registerPath, body)
		if resp.code != http.StatusCreated {
			t.Fatalf("%d %s", resp.code, resp.body)
		}
		srv := decodeServer(t, resp)
		skills := b.get(t, "/v1/mcp/servers/"+srv+"/skills")
		if !strings.Contains(string(skills.body), `"s😀"`) || !strings.Contains(string(skills.body), `"\\ud800 é é 😀"`) {
			t.Fatalf("skills %s", skills.body)
		}
	})
}

func decodeServer(t *testing.T, resp response) string {
	t.Helper()
	return decode[struct {
		ServerID string `json:"server_id"`
	}](t, resp).ServerID
}

// FuzzRegisterBody: no body makes register answer a 5xx; a 400 names a
// field or is a malformed-body problem; and a body that is accepted is
// valid UTF-8 whose member names (top level and skills) are the contract's,
// exactly, each once.
func FuzzRegisterBody(f *testing.F) {
	const rest = `"version":"1.0.0","supported_protocols":["2025-06-18"]`
	for _, s := range []string{
		`{"module_name":"a",` + rest + `}`,
		`{"module_name":"a","MODULE_NAME":"b",` + rest + `}`,
		`{"module_name":"a","module_name":"b",` + rest + `}`,
		`{"module_name":"a",` + rest + `,"skills":[{"name":"x","Name":"y"}]}`,
		`{"module_name":"a",` + rest + `,"skills":[{"name":"x\ud800"}]}`,
		"{\"module_name\":\"a\"," + rest + ",\"skills\":[{\"name\":\"x\xff\"}]}",
		`{"module_name":"a",` + rest + `,"capability_advertisement":{"\udc00":"\ud83d\ude00"}}`,
		`{"module_name":"a",` + rest + `,"capability_advertisement":{"a":"\\ud800","a":1}}`,
		`{"":[]}`,
	} {
		f.Add(s)
	}
	top := map[string]bool{"module_name": true, "version": true, "supported_protocols": true,
		"capability_advertisement": true, "skills": true}
	f.Fuzz(func(t *testing.T, body string) {
		b := setup(t)
		resp := b.post(t, registerPath, body)
		switch {
		case resp.code >= 500:
			t.Fatalf("%q: %d %s", body, resp.code, resp.body)
		case resp.code == http.StatusBadRequest:
			if p := wantProblem(t, resp, http.StatusBadRequest, ""); p.Field == "" && p.Type != api.ProblemMalformed {
				t.Fatalf("%q: 400 naming no field: %s", body, resp.body)
			}
		case resp.code == http.StatusCreated:
			if !utf8.ValidString(body) {
				t.Fatalf("%q: invalid UTF-8 accepted", body)
			}
			var members map[string]json.RawMessage
			if err := json.Unmarshal([]byte(body), &members); err != nil {
				t.Fatalf("%q: accepted, but %v", body, err)
			}
			if names := exactNames(t, []byte(body)); !sameKeys(names, members, top) {
				t.Fatalf("%q: accepted with names %q", body, names)
			}
			var skills []json.RawMessage
			_ = json.Unmarshal(members["skills"], &skills)
			for _, s := range skills {
				if string(s) == "null" {
					continue
				}
				var m map[string]json.RawMessage
				_ = json.Unmarshal(s, &m)
				if names := exactNames(t, s); !sameKeys(names, m, map[string]bool{"name": true, "description": true}) {
					t.Fatalf("%q: accepted a skill with names %q", body, names)
				}
			}
		}
	})
}

// exactNames returns the member names of the JSON object obj, in order.
func exactNames(t *testing.T, obj []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// sameKeys reports whether names are distinct, each a key of known, and
// exactly the keys of m.
func sameKeys(names []string, m map[string]json.RawMessage, known map[string]bool) bool {
	if len(names) != len(m) {
		return false
	}
	for _, n := range names {
		if _, ok := m[n]; !ok || !known[n] {
			return false
		}
	}
	return true
}
