package tui

import (
	"io"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/cyberos/mcpd/pkg/registry"
)

// styles are every style of the board, made by one renderer so that NoColor
// (an Ascii profile) reaches all of them.
type styles struct {
	plain    lipgloss.Style
	title    lipgloss.Style
	dim      lipgloss.Style
	bold     lipgloss.Style
	banner   lipgloss.Style
	header   lipgloss.Style
	selected lipgloss.Style
	helpKey  lipgloss.Style
	helpDesc lipgloss.Style
	status   map[registry.Status]lipgloss.Style
}

// newRenderer returns a renderer for out; noColor forces the Ascii profile
// (termenv already honours NO_COLOR and a non-terminal out).
func newRenderer(out io.Writer, noColor bool) *lipgloss.Renderer {
	r := lipgloss.NewRenderer(out)
	if noColor {
		r.SetColorProfile(termenv.Ascii)
	}
	return r
}

func newStyles(r *lipgloss.Renderer) styles {
	return styles{
		plain:    r.NewStyle(),
		title:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("6")),
		dim:      r.NewStyle().Foreground(lipgloss.Color("8")),
		bold:     r.NewStyle().Bold(true),
		banner:   r.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(lipgloss.Color("1")),
		header:   r.NewStyle().Bold(true).Underline(true),
		selected: r.NewStyle().Reverse(true),
		helpKey:  r.NewStyle().Bold(true),
		helpDesc: r.NewStyle().Foreground(lipgloss.Color("8")),
		status: map[registry.Status]lipgloss.Style{
			registry.StatusHealthy:      r.NewStyle().Foreground(lipgloss.Color("2")),
			registry.StatusDegraded:     r.NewStyle().Foreground(lipgloss.Color("3")),
			registry.StatusUnhealthy:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("1")),
			registry.StatusDeregistered: r.NewStyle().Foreground(lipgloss.Color("8")),
		},
	}
}

// statusStyle is the style of st; an unknown status is plain.
func (s styles) statusStyle(st registry.Status) lipgloss.Style {
	if v, ok := s.status[st]; ok {
		return v
	}
	return s.plain
}
