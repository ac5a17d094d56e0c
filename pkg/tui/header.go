package tui

import (
	"fmt"
	"strings"

	"github.com/cyberos/mcpd/pkg/registry"
)

// header is the top of the board: the title, when the data came, and the
// number of servers in each status.
type header struct {
	styles styles
	width  int
	counts map[registry.Status]int
	total  int
	info   headerInfo
}

// headerInfo is what the root tells the header before it renders.
type headerInfo struct {
	listed string // "10:00:05", or empty before the first list
	feed   feedState
	sort   sortKey
	status registry.Status // the status filter, empty: all
	module string          // the module filter
	shown  int             // rows the table shows
}

func newHeader(st styles) header {
	return header{styles: st, counts: map[registry.Status]int{}}
}

// SetCounts sets the number of servers in each status and in all.
func (h *header) SetCounts(counts map[registry.Status]int, total int) {
	h.counts, h.total = counts, total
}

// SetSize sets the width the header fills.
func (h *header) SetSize(width, _ int) { h.width = width }

// Height is the number of lines View renders.
func (h header) Height() int { return 2 }

// View renders the title line and the counts line.
func (h header) View() string {
	st := h.styles
	left := st.title.Render("mcpctl watch") + st.dim.Render(fmt.Sprintf(" · %d servers", h.total))
	right := "waiting for the API"
	if h.info.listed != "" {
		right = "listed " + h.info.listed
	}
	switch h.info.feed {
	case feedConnecting:
		right += " · connecting to the feed"
	case feedLive:
		right += " · live"
	case feedReconnecting:
		right += " · reconnecting…"
	}
	line1 := spread(left, st.dim.Render(right), h.width)

	parts := make([]string, 0, len(registry.Statuses))
	for _, s := range registry.Statuses {
		label := fmt.Sprintf("%s %d", s, h.counts[s])
		if h.info.status == s {
			label = "[" + label + "]"
		}
		parts = append(parts, st.statusStyle(s).Render(label))
	}
	counts := strings.Join(parts, "   ")

	var view []string
	view = append(view, "sort: "+h.info.sort.String())
	if h.info.status != "" {
		view = append(view, "status: "+string(h.info.status))
	}
	if h.info.module != "" {
		view = append(view, fmt.Sprintf("module: %q", h.info.module))
	}
	view = append(view, fmt.Sprintf("%d shown", h.info.shown))
	line2 := spread(counts, st.dim.Render(strings.Join(view, " · ")), h.width)
	return line1 + "\n" + line2
}
