package registry_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/registry"
)

func validInfo() registry.ServerInfo {
	return registry.ServerInfo{
		ModuleName:              "calendar",
		Version:                 "1.3.2",
		SupportedProtocols:      []string{"2025-06-18"},
		CapabilityAdvertisement: json.RawMessage(`{"tools":{"listChanged":true}}`),
		Skills:                  []registry.SkillInfo{{Name: "list-events", Description: "lists events"}},
		TraceID:                 "4bf92f3577b34da6a3ce929d0e0e4736",
	}
}

func skills(n int, name func(i int) string) []registry.SkillInfo {
	out := make([]registry.SkillInfo, n)
	for i := range out {
		out[i] = registry.SkillInfo{Name: name(i)}
	}
	return out
}

func protocols(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("2027-%02d-%02d", i/28+1, i%28+1) // later than every published revision
	}
	return out
}

// TestValidate checks every input rule of the contract: each case changes
// one field of a valid registration; field "" means valid.
func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(*registry.ServerInfo)
		field  string
	}{
		{"valid", func(*registry.ServerInfo) {}, ""},

		// module_name: 1-63 characters of [a-z0-9-], starting with a letter.
		{"module one letter", func(i *registry.ServerInfo) { i.ModuleName = "a" }, ""},
		{"module 63", func(i *registry.ServerInfo) { i.ModuleName = "a" + strings.Repeat("b", 62) }, ""},
		{"module digits and dashes", func(i *registry.ServerInfo) { i.ModuleName = "cal-2-x" }, ""},
		{"module empty", func(i *registry.ServerInfo) { i.ModuleName = "" }, "module_name"},
		{"module 64", func(i *registry.ServerInfo) { i.ModuleName = "a" + strings.Repeat("b", 63) }, "module_name"},
		{"module uppercase", func(i *registry.ServerInfo) { i.ModuleName = "Calendar" }, "module_name"},
		{"module starts with digit", func(i *registry.ServerInfo) { i.ModuleName = "2cal" }, "module_name"},
		{"module starts with dash", func(i *registry.ServerInfo) { i.ModuleName = "-cal" }, "module_name"},
		{"module underscore", func(i *registry.ServerInfo) { i.ModuleName = "my_cal" }, "module_name"},
		{"module dot", func(i *registry.ServerInfo) { i.ModuleName = "my.cal" }, "module_name"},
		{"module space", func(i *registry.ServerInfo) { i.ModuleName = "my cal" }, "module_name"},
		{"module slash", func(i *registry.ServerInfo) { i.ModuleName = "a/b" }, "module_name"},
		{"module non-ascii", func(i *registry.ServerInfo) { i.ModuleName = "café" }, "module_name"},
		{"module newline", func(i *registry.ServerInfo) { i.ModuleName = "cal\n" }, "module_name"},

		// version: a semantic version.
		{"version zero", func(i *registry.ServerInfo) { i.Version = "0.0.0" }, ""},
		{"version pre-release and build", func(i *registry.ServerInfo) { i.Version = "1.0.0-rc.1+build.5" }, ""},
		{"version build", func(i *registry.ServerInfo) { i.Version = "10.20.30+meta-data" }, ""},
		{"version empty", func(i *registry.ServerInfo) { i.Version = "" }, "version"},
		{"version major only", func(i *registry.ServerInfo) { i.Version = "1" }, "version"},
		{"version two parts", func(i *registry.ServerInfo) { i.Version = "1.2" }, "version"},
		{"version four parts", func(i *registry.ServerInfo) { i.Version = "1.2.3.4" }, "version"},
		{"version v prefix", func(i *registry.ServerInfo) { i.Version = "v1.2.3" }, "version"},
		{"version leading zero", func(i *registry.ServerInfo) { i.Version = "01.2.3" }, "version"},
		{"version empty pre-release", func(i *registry.ServerInfo) { i.Version = "1.2.3-" }, "version"},
		{"version empty build", func(i *registry.ServerInfo) { i.Version = "1.2.3+" }, "version"},
		{"version letters", func(i *registry.ServerInfo) { i.Version = "latest" }, "version"},
		{"version spaces", func(i *registry.ServerInfo) { i.Version = " 1.2.3" }, "version"},
		{"version too long", func(i *registry.ServerInfo) { i.Version = "1.2.3-" + strings.Repeat("a", 300) }, "version"},

		// supported_protocols: 1-16 MCP revision dates: published ones, or later.
		{"protocols every published", func(i *registry.ServerInfo) { i.SupportedProtocols = registry.PublishedProtocols }, ""},
		{"protocols later date", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{"2027-03-01"} }, ""},
		{"protocols 16", func(i *registry.ServerInfo) { i.SupportedProtocols = protocols(16) }, ""},
		{"protocol between published revisions", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{"2025-01-01"} }, "supported_protocols"},
		{"protocols nil", func(i *registry.ServerInfo) { i.SupportedProtocols = nil }, "supported_protocols"},
		{"protocols empty", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{} }, "supported_protocols"},
		{"protocols 17", func(i *registry.ServerInfo) { i.SupportedProtocols = protocols(17) }, "supported_protocols"},
		{"protocol not a date", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{"latest"} }, "supported_protocols"},
		{"protocol short month", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{"2025-6-18"} }, "supported_protocols"},
		{"protocol impossible date", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{"2025-02-30"} }, "supported_protocols"},
		{"protocol month 13", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{"2025-13-01"} }, "supported_protocols"},
		{"protocol before the first revision", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{"2024-11-04"} }, "supported_protocols"},
		{"protocol with time", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{"2025-06-18T00:00:00Z"} }, "supported_protocols"},
		{"protocol padded", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{" 2025-06-18"} }, "supported_protocols"},
		{"protocol empty", func(i *registry.ServerInfo) { i.SupportedProtocols = []string{"2025-06-18", ""} }, "supported_protocols"},

		// capability_advertisement: a JSON object.
		{"capabilities absent", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = nil }, ""},
		{"capabilities null", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`null`) }, ""},
		{"capabilities empty object", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(` {} `) }, ""},
		{"capabilities nested", func(i *registry.ServerInfo) {
			i.CapabilityAdvertisement = json.RawMessage(`{"a":{"b":[1,{"c":null}]}}`)
		}, ""},
		{"capabilities array", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`[]`) }, "capability_advertisement"},
		{"capabilities string", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`"tools"`) }, "capability_advertisement"},
		{"capabilities number", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`1`) }, "capability_advertisement"},
		{"capabilities true", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`true`) }, "capability_advertisement"},
		{"capabilities broken", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`{"a":`) }, "capability_advertisement"},
		{"capabilities trailing", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`{} {}`) }, "capability_advertisement"},

		// Text PostgreSQL stores: UTF-8, no NUL, no lone surrogate (jsonb).
		{"capabilities unicode", func(i *registry.ServerInfo) {
			i.CapabilityAdvertisement = json.RawMessage(`{"a":"\ud83d\ude00 é \u00e9","\\ud800":"\\u0000","b":"\\\\ud800"}`)
		}, ""},
		{"capabilities nul", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`{"a":"\u0000"}`) }, "capability_advertisement"},
		{"capabilities nul key", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`{"\u0000":1}`) }, "capability_advertisement"},
		{"capabilities lone high surrogate", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`{"a":"\ud800"}`) }, "capability_advertisement"},
		{"capabilities lone low surrogate key", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage(`{"\uDC00":1}`) }, "capability_advertisement"},
		{"capabilities high surrogate then letter", func(i *registry.ServerInfo) {
			i.CapabilityAdvertisement = json.RawMessage(`{"a":"\ud800\u0041"}`)
		}, "capability_advertisement"},
		{"capabilities surrogate after escaped backslash", func(i *registry.ServerInfo) {
			i.CapabilityAdvertisement = json.RawMessage(`{"a":"\\\ud800"}`)
		}, "capability_advertisement"},
		{"capabilities bad utf-8", func(i *registry.ServerInfo) { i.CapabilityAdvertisement = json.RawMessage("{\"a\":\"\xff\"}") }, "capability_advertisement"},
		{"skill name bad utf-8", func(i *registry.ServerInfo) { i.Skills = skills(1, func(int) string { return "a\xff" }) }, "skills[0].name"},
		{"skill name nul", func(i *registry.ServerInfo) { i.Skills = skills(1, func(int) string { return "a\x00" }) }, "skills[0].name"},
		{"skill description bad utf-8", func(i *registry.ServerInfo) {
			i.Skills = []registry.SkillInfo{{Name: "a"}, {Name: "b", Description: "\xed\xa0\x80"}}
		}, "skills[1].description"},
		{"skill description nul", func(i *registry.ServerInfo) { i.Skills = []registry.SkillInfo{{Name: "a", Description: "\x00"}} }, "skills[0].description"},

		// skills: at most 256, names unique, 1-128 characters.
		{"skills none", func(i *registry.ServerInfo) { i.Skills = nil }, ""},
		{"skills 256", func(i *registry.ServerInfo) {
			i.Skills = skills(256, func(n int) string { return fmt.Sprint("s", n) })
		}, ""},
		{"skill name 128", func(i *registry.ServerInfo) {
			i.Skills = skills(1, func(int) string { return strings.Repeat("x", 128) })
		}, ""},
		{"skill name 128 runes", func(i *registry.ServerInfo) {
			i.Skills = skills(1, func(int) string { return strings.Repeat("é", 128) })
		}, ""},
		{"skills 257", func(i *registry.ServerInfo) {
			i.Skills = skills(257, func(n int) string { return fmt.Sprint("s", n) })
		}, "skills"},
		{"skill name empty", func(i *registry.ServerInfo) { i.Skills = skills(1, func(int) string { return "" }) }, "skills[0].name"},
		{"skill name 129", func(i *registry.ServerInfo) {
			i.Skills = skills(3, func(n int) string { return strings.Repeat("x", 127+n) })
		}, "skills[2].name"},
		{"skill name 129 runes", func(i *registry.ServerInfo) {
			i.Skills = skills(1, func(int) string { return strings.Repeat("é", 129) })
		}, "skills[0].name"},
		{"skill names duplicate", func(i *registry.ServerInfo) {
			i.Skills = skills(3, func(n int) string { return []string{"a", "b", "a"}[n] })
		}, "skills[2].name"},

		// trace_id: a W3C trace id when given.
		{"trace id empty", func(i *registry.ServerInfo) { i.TraceID = "" }, ""},
		{"trace id uppercase", func(i *registry.ServerInfo) { i.TraceID = "4BF92F3577B34DA6A3CE929D0E0E4736" }, "trace_id"},
		{"trace id all zero", func(i *registry.ServerInfo) { i.TraceID = strings.Repeat("0", 32) }, "trace_id"},
		{"trace id short", func(i *registry.ServerInfo) { i.TraceID = "4bf92f35" }, "trace_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info := validInfo()
			c.change(&info)
			err := info.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *registry.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v, want a *FieldError for %s", err, c.field)
			}
			if fe.Field != c.field {
				t.Fatalf("Validate() names %q (%v), want %q", fe.Field, err, c.field)
			}
			if fe.Reason == "" || !strings.HasPrefix(err.Error(), c.field+": ") {
				t.Fatalf("Validate() error %q: want %q and a reason", err.Error(), c.field+": ")
			}
		})
	}
}

// A long bad value is cut in the message, not echoed whole.
func TestValidateTruncatesValues(t *testing.T) {
	info := validInfo()
	info.Version = strings.Repeat("x", 10_000)
	err := info.Validate()
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("Validate() = %d bytes of error, want a short one", len(fmt.Sprint(err)))
	}
}

func TestValidProtocol(t *testing.T) {
	for _, p := range registry.PublishedProtocols {
		if !registry.ValidProtocol(p) {
			t.Errorf("ValidProtocol(%q) = false for a published revision", p)
		}
	}
	for p, want := range map[string]bool{"2099-12-31": true, "2024-11-05": true, "2024-11-04": false, "2025-00-10": false, "20250618": false} {
		if got := registry.ValidProtocol(p); got != want {
			t.Errorf("ValidProtocol(%q) = %v, want %v", p, got, want)
		}
	}
}
