package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestUnstorableTextRefused: text that PostgreSQL cannot store is a 400
// naming the field, whatever the store (found against the real binary:
// each of these was a 500 there, and a 201 on the memory store).
func TestUnstorableTextRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := `{"module_name":"nul","version":"1.0.0","supported_protocols":["2025-06-18"]`
	for _, c := range []struct{ name, extra, field string }{
		{"nul in skill name", `,"skills":[{"name":"a\u0000b"}]`, "skills[0].name"},
		{"nul in second skill description", `,"skills":[{"name":"a"},{"name":"b","description":"\u0000"}]`, "skills[1].description"},
		{"nul in capabilities", `,"capability_advertisement":{"a":["x","\u0000"]}`, "capability_advertisement"},
		{"nul key in capabilities", `,"capability_advertisement":{"\u0000":1}`, "capability_advertisement"},
		{"nul after an escaped backslash", `,"capability_advertisement":{"a":"\\\u0000"}`, "capability_advertisement"},
		{"number past numeric", `,"capability_advertisement":{"n":1e131072}`, "capability_advertisement"},
		{"negative number past numeric", `,"capability_advertisement":{"n":[-1e999999]}`, "capability_advertisement"},
		{"number below numeric's scale", `,"capability_advertisement":{"n":1e-999999}`, "capability_advertisement"},
		{"20,000 decimals", `,"capability_advertisement":{"n":0.` + strings.Repeat("0", 20000) + `}`, "capability_advertisement"},
		{"bad utf-8 in capabilities", ",\"capability_advertisement\":{\"a\":\"\xff\"}", "capability_advertisement"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, b.post(t, registerPath, base+c.extra+`}`), http.StatusBadRequest, c.field)
		})
	}
	t.Run("the text of a backslash and u0000 is stored", func(t *testing.T) {
		resp := b.post(t, registerPath, base+`,"capability_advertisement":{"a":"\\u0000"},"skills":[{"name":"\\u0000"}]}`)
		if resp.code != http.StatusCreated {
			t.Fatalf("%d %s", resp.code, resp.body)
		}
	})
	t.Run("a validation error comes first", func(t *testing.T) {
		wantProblem(t, b.post(t, registerPath, `{"module_name":"Bad","version":"1.0.0","supported_protocols":["2025-06-18"],`+
			`"skills":[{"name":"\u0000"}]}`), http.StatusBadRequest, "module_name")
	})
}

// TestSkillTextOneLine: a skill's name and description keep the rule of a
// description: no control characters, line breaks or bidirectional
// overrides, a 400 naming the skill's field ("evil\u001b[31mRED" was a
// 201, and mcpctl printed it raw).
func TestSkillTextOneLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := `{"module_name":"ctl","version":"1.0.0","supported_protocols":["2025-06-18"],"skills":[{"name":"ok"},`
	for _, c := range []struct{ name, skill, field string }{
		{"escape in name", `{"name":"evil\u001b[31mRED","description":"d"}`, "skills[1].name"},
		{"escape in description", `{"name":"evil","description":"d\u001b[2J"}`, "skills[1].description"},
		{"line break in name", `{"name":"a\nb"}`, "skills[1].name"},
		{"override in description", `{"name":"a","description":"abc\u202edcb"}`, "skills[1].description"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := wantProblem(t, b.post(t, registerPath, base+c.skill+`]}`), http.StatusBadRequest, c.field)
			if !strings.Contains(p.Detail, "control characters") {
				t.Fatalf("problem %+v", p)
			}
		})
	}
}
