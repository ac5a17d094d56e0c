package tui

import (
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/cyberos/mcpd/pkg/registry"
)

// eventPane shows the latest transitions the feed brought, newest last.
type eventPane struct {
	styles styles
	events []registry.Event
	width  int
	height int // lines, the title included
	now    time.Time
}

func newEventPane(st styles) eventPane { return eventPane{styles: st} }

// Update takes the time of every tick.
func (p eventPane) Update(msg tea.Msg) (eventPane, tea.Cmd) {
	if msg, ok := msg.(clockMsg); ok {
		p.now = msg.now
	}
	return p, nil
}

// add appends events in the feed's order, keeping the latest EventLimit.
func (p eventPane) add(events []registry.Event) eventPane {
	if len(events) >= EventLimit {
		p.events = slices.Clone(events[len(events)-EventLimit:])
		return p
	}
	keep := p.events[max(len(p.events)+len(events)-EventLimit, 0):]
	p.events = append(slices.Clip(keep), events...)
	return p
}

// SetSize sets the cells the pane fills, its title line included.
func (p *eventPane) SetSize(width, height int) { p.width, p.height = width, height }

// View renders the title and as many of the latest events as fit.
func (p eventPane) View() string {
	if p.height <= 0 {
		return ""
	}
	title := "── latest transitions "
	title += strings.Repeat("─", max(p.width-len([]rune(title)), 0))
	lines := []string{p.styles.dim.Render(title)}
	rows := p.height - 1
	if len(p.events) == 0 {
		if rows > 0 {
			lines = append(lines, p.styles.dim.Render("  no transitions since the board started"))
		}
		return strings.Join(lines, "\n")
	}
	loc := p.now.Location()
	if p.now.IsZero() {
		loc = time.Local
	}
	start := max(len(p.events)-rows, 0)
	for _, ev := range p.events[start:] {
		from := "-"
		if ev.FromStatus != nil {
			from = string(*ev.FromStatus)
		}
		change := p.styles.statusStyle(registry.Status(from)).Render(from) + " → " +
			p.styles.statusStyle(ev.ToStatus).Render(string(ev.ToStatus))
		line := "  " + ev.OccurredAt.In(loc).Format("15:04:05") + "  " + fit(ev.ModuleName, 28) + " " +
			fit(change, 28) + " " + p.styles.dim.Render(string(ev.Kind))
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
