package mcpinspect

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/registry"
)

// MaxDescriptionLen bounds a skill's description taken from a tool's, in
// characters, so that 256 skills fit in one registration body.
const MaxDescriptionLen = 512

// VersionError is a serverInfo.version that is not a semantic version, so
// that mcpd would refuse it.
type VersionError struct {
	Server  string // serverInfo.name
	Version string // serverInfo.version as sent
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("server %q reports version %q in serverInfo, which is not a semantic version (MAJOR.MINOR.PATCH): set the version to register it with (--version)",
		e.Server, e.Version)
}

// Registration is a registration request made from a report, with what was
// left out of it.
type Registration struct {
	Request apiwire.RegisterRequest
	// Warnings say which tools were not made skills and why, and which
	// descriptions were shortened.
	Warnings []string
}

// Registration returns the registration of module from the report: its
// version (unless version overrides it), its revisions, its capabilities
// object and a skill per tool (name and description). Tools whose name is
// empty, longer than 128 characters or a repeat are skipped, and tools past
// the 256th, each with a warning. A version that is not semantic is a
// *VersionError.
func (r Report) Registration(module, version string) (Registration, error) {
	if version == "" {
		version = r.Version
		if !registry.ValidVersion(version) {
			return Registration{}, &VersionError{Server: r.Name, Version: r.Version}
		}
	}
	reg := Registration{Request: apiwire.RegisterRequest{
		ModuleName:              module,
		Version:                 version,
		SupportedProtocols:      r.Protocols,
		CapabilityAdvertisement: r.Capabilities,
	}}
	if len(reg.Request.SupportedProtocols) == 0 && r.Protocol != "" {
		reg.Request.SupportedProtocols = []string{r.Protocol}
	}
	if len(reg.Request.SupportedProtocols) > registry.MaxProtocols {
		reg.Request.SupportedProtocols = reg.Request.SupportedProtocols[:registry.MaxProtocols]
	}
	seen := make(map[string]bool, len(r.Tools))
	skipped := 0
	for _, t := range r.Tools {
		n := utf8.RuneCountInString(t.Name)
		switch {
		case n == 0:
			reg.Warnings = append(reg.Warnings, "skipped a tool without a name")
			continue
		case n > registry.MaxSkillNameLen:
			reg.Warnings = append(reg.Warnings, fmt.Sprintf("skipped tool %q: its name is %d characters, skill names are at most %d",
				shorten(t.Name, 40), n, registry.MaxSkillNameLen))
			continue
		case seen[t.Name]:
			reg.Warnings = append(reg.Warnings, fmt.Sprintf("skipped tool %q: listed twice", t.Name))
			continue
		case registry.LineProblem(t.Name) != "":
			reg.Warnings = append(reg.Warnings, fmt.Sprintf("skipped tool %q: skill names are one line of text, "+
				"without control characters, line breaks or bidirectional overrides", shorten(t.Name, 40)))
			continue
		}
		if len(reg.Request.Skills) == registry.MaxSkills {
			skipped++
			continue
		}
		seen[t.Name] = true
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		// A skill's description is one line (a tool's is often several).
		desc = registry.OneLine(desc)
		if utf8.RuneCountInString(desc) > MaxDescriptionLen {
			desc = shorten(desc, MaxDescriptionLen)
			reg.Warnings = append(reg.Warnings, fmt.Sprintf("shortened the description of tool %q to %d characters", t.Name, MaxDescriptionLen))
		}
		reg.Request.Skills = append(reg.Request.Skills, registry.SkillInfo{Name: t.Name, Description: desc})
	}
	if skipped > 0 {
		reg.Warnings = append(reg.Warnings, fmt.Sprintf("skipped %d tools past the first %d: a server has at most %d skills",
			skipped, registry.MaxSkills, registry.MaxSkills))
	}
	return reg, nil
}

// shorten cuts s to at most n characters, the last one an ellipsis.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	return strings.TrimSpace(string(rs[:n-1])) + "…"
}
