package heartbeat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// FieldError is an input that breaks the contract's rules; Field names it as
// the API spells it.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Input limits of a registration.
const (
	MaxModuleNameLen = 63
	MaxProtocols     = 16
	MaxSkills        = 256
	MaxSkillNameLen  = 128
)

// PublishedProtocols are the MCP revisions published when this build was
// made; later dates are accepted too, so new revisions need no release.
var PublishedProtocols = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

var (
	moduleNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	// Semantic Versioning 2.0.0, the regular expression semver.org gives.
	semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
		`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
		`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	revisionRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

// ValidModuleName reports whether s is 1-63 of [a-z0-9-], starting with a letter.
func ValidModuleName(s string) bool { return moduleNameRE.MatchString(s) }

// ValidVersion reports whether s is a semantic version.
func ValidVersion(s string) bool { return len(s) <= 256 && semverRE.MatchString(s) }

// ValidProtocol reports whether s is an MCP revision: one of the published
// revisions, or a real date later than the newest of them.
func ValidProtocol(s string) bool {
	if !revisionRE.MatchString(s) {
		return false
	}
	if _, err := time.Parse("2006-01-02", s); err != nil {
		return false
	}
	return slices.Contains(PublishedProtocols, s) || s > PublishedProtocols[len(PublishedProtocols)-1]
}

// Validate checks a registration against the contract's input rules.
func (info ServerInfo) Validate() error {
	if !ValidModuleName(info.ModuleName) {
		return &FieldError{"module_name", "must be 1-63 characters of [a-z0-9-], starting with a letter"}
	}
	if !ValidVersion(info.Version) {
		return &FieldError{"version", fmt.Sprintf("%q is not a semantic version (MAJOR.MINOR.PATCH)", truncate(info.Version))}
	}
	if n := len(info.SupportedProtocols); n < 1 || n > MaxProtocols {
		return &FieldError{"supported_protocols", fmt.Sprintf("must have 1-%d entries, has %d", MaxProtocols, n)}
	}
	for _, p := range info.SupportedProtocols {
		if !ValidProtocol(p) {
			return &FieldError{"supported_protocols", fmt.Sprintf("%q is not an MCP revision (YYYY-MM-DD: one of %s, or a later date)",
				truncate(p), strings.Join(PublishedProtocols, ", "))}
		}
	}
	if c := bytes.TrimSpace(info.CapabilityAdvertisement); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
		var obj map[string]json.RawMessage
		if c[0] != '{' || json.Unmarshal(c, &obj) != nil {
			return &FieldError{"capability_advertisement", "must be a JSON object"}
		}
	}
	if len(info.Skills) > MaxSkills {
		return &FieldError{"skills", fmt.Sprintf("at most %d skills, has %d", MaxSkills, len(info.Skills))}
	}
	seen := make(map[string]bool, len(info.Skills))
	for i, s := range info.Skills {
		if n := len([]rune(s.Name)); n < 1 || n > MaxSkillNameLen {
			return &FieldError{fmt.Sprintf("skills[%d].name", i), fmt.Sprintf("must be 1-%d characters", MaxSkillNameLen)}
		}
		if seen[s.Name] {
			return &FieldError{fmt.Sprintf("skills[%d].name", i), fmt.Sprintf("duplicate skill name %q", s.Name)}
		}
		seen[s.Name] = true
	}
	if info.TraceID != "" && !ValidTraceID(info.TraceID) {
		return &FieldError{"trace_id", "must be 32 lowercase hex digits"}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
