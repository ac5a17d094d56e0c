package output

import (
	"strings"

	"github.com/cyberos/mcpd/pkg/registry"
)

// SkillDirectory prints skills found across servers (GET /v1/mcp/skills),
// in the order given (the API's: by name, then module).
func (p *Printer) SkillDirectory(skills []registry.SkillEntry) error {
	if skills == nil {
		skills = []registry.SkillEntry{}
	}
	if len(skills) == 0 {
		return p.empty("skills", skills)
	}
	f := p.format()
	if f.Structured() {
		return Write(p.Out, f, skills)
	}
	wide := f == Wide
	header := []string{"NAME", "MODULE", "VERSION", "AVAILABLE", "REASON", "SERVER STATUS"}
	if wide {
		header = append(header, "PROTOCOLS", "SERVER ID", "SKILL ID", "DESCRIPTION")
	}
	rows := make([][]string, 0, len(skills))
	for _, s := range skills {
		reason := ""
		if s.UnavailableReason != nil {
			reason = *s.UnavailableReason
		}
		row := []string{Escape(s.Name), Escape(s.ModuleName), Escape(s.Version), p.available(s.Available),
			p.dash(Escape(reason)), p.status(s.ServerStatus)}
		if wide {
			row = append(row, Escape(strings.Join(s.SupportedProtocols, ",")), s.ServerID.String(), s.SkillID.String(),
				p.dash(Escape(s.Description)))
		}
		rows = append(rows, row)
	}
	return WriteTable(p.Out, p.Terminal, p.header(header), rows)
}

// available is "yes" in green or "no" in red.
func (p *Printer) available(ok bool) string {
	s, color := "no", ansiRed
	if ok {
		s, color = "yes", ansiGreen
	}
	if p.Color {
		return paint(color, s)
	}
	return s
}
