package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/google/uuid"
)

// Fixed column widths of the servers table, each with its trailing space.
const (
	colMarker   = 2
	colVersion  = 12
	colStatus   = 14
	colAvail    = 11
	colLastBeat = 16
	colChanged  = 12
	minModule   = 12
	maxModule   = 40
)

// serverTable is the list of servers with a cursor, one row each: module,
// version, status, the share of the last 24 hours it was available (as the
// last list said), age of the last heartbeat, age of the last transition
// the feed told of, protocols.
type serverTable struct {
	styles  styles
	keys    tableKeyMap
	rows    []*entry
	empty   string
	cursor  int
	offset  int
	width   int
	height  int // lines, the column header included
	module  int // width of the module column
	now     time.Time
	focused bool
	// avail shows the availability column: the last list carried the
	// ratios (an mcpd without GET /v1/mcp/availability does not).
	avail bool
}

func newServerTable(st styles) serverTable {
	return serverTable{styles: st, keys: defaultTableKeyMap(), empty: "no servers registered", focused: true}
}

// Update moves the cursor on keys and takes the time of every clock tick.
func (t serverTable) Update(msg tea.Msg) (serverTable, tea.Cmd) {
	switch msg := msg.(type) {
	case clockMsg:
		t.now = msg.now
	case tea.KeyMsg:
		if !t.focused {
			return t, nil
		}
		page := max(t.bodyHeight(), 1)
		switch {
		case key.Matches(msg, t.keys.Up):
			t.move(-1)
		case key.Matches(msg, t.keys.Down):
			t.move(1)
		case key.Matches(msg, t.keys.PageUp):
			t.move(-page)
		case key.Matches(msg, t.keys.PageDown):
			t.move(page)
		case key.Matches(msg, t.keys.Top):
			t.move(-len(t.rows))
		case key.Matches(msg, t.keys.Bottom):
			t.move(len(t.rows))
		}
	}
	return t, nil
}

// SetSize sets the cells the table fills, its header line included.
func (t *serverTable) SetSize(width, height int) {
	t.width, t.height = width, height
	rest := width - colMarker - colVersion - colStatus - t.availWidth() - colLastBeat - colChanged
	t.module = min(max(rest*45/100, minModule), maxModule)
	t.scroll()
}

// availWidth is the width of the availability column: 0 when hidden.
func (t serverTable) availWidth() int {
	if t.avail {
		return colAvail
	}
	return 0
}

// ShowAvailability shows or hides the availability column.
func (t *serverTable) ShowAvailability(show bool) {
	if t.avail != show {
		t.avail = show
		t.SetSize(t.width, t.height)
	}
}

// SetRows replaces the rows, keeping the cursor on the same server when it
// is still listed; empty is what an empty table says.
func (t *serverTable) SetRows(rows []*entry, empty string) {
	var selected uuid.UUID
	if t.cursor >= 0 && t.cursor < len(t.rows) {
		selected = t.rows[t.cursor].ServerID
	}
	t.rows, t.empty = rows, empty
	t.cursor = 0
	for i, r := range rows {
		if r.ServerID == selected {
			t.cursor = i
			break
		}
	}
	t.scroll()
}

// Position is "first-last of n" for the visible rows.
func (t serverTable) Position() string {
	if len(t.rows) == 0 {
		return "0 of 0"
	}
	last := min(t.offset+t.bodyHeight(), len(t.rows))
	return fmt.Sprintf("%d-%d of %d", t.offset+1, last, len(t.rows))
}

func (t serverTable) bodyHeight() int { return t.height - 1 }

func (t *serverTable) move(n int) {
	t.cursor = min(max(t.cursor+n, 0), max(len(t.rows)-1, 0))
	t.scroll()
}

// scroll keeps the cursor inside the visible rows.
func (t *serverTable) scroll() {
	body := max(t.bodyHeight(), 1)
	if t.cursor < t.offset {
		t.offset = t.cursor
	}
	if t.cursor >= t.offset+body {
		t.offset = t.cursor - body + 1
	}
	if maxOff := max(len(t.rows)-body, 0); t.offset > maxOff {
		t.offset = maxOff
	}
	t.offset = max(t.offset, 0)
}

// View renders the column header and the visible rows.
func (t serverTable) View() string {
	if t.height <= 0 {
		return ""
	}
	aw := t.availWidth()
	protocols := max(t.width-colMarker-t.module-colVersion-colStatus-aw-colLastBeat-colChanged, 0)
	head := fit("", colMarker) + fit("MODULE", t.module) + fit("VERSION", colVersion) +
		fit("STATUS", colStatus) + fit("AVAIL 24H", aw) + fit("LAST HEARTBEAT", colLastBeat) + fit("CHANGED", colChanged) +
		fit("PROTOCOLS", protocols)
	lines := []string{t.styles.header.Render(strings.TrimRight(head, " "))}
	if len(t.rows) == 0 {
		lines = append(lines, t.styles.dim.Render(fit("", colMarker)+t.empty))
		return padLines(lines, t.height)
	}
	end := min(t.offset+t.bodyHeight(), len(t.rows))
	for i := t.offset; i < end; i++ {
		s := t.rows[i]
		selected := i == t.cursor && t.focused
		marker := ""
		if selected {
			marker = ">"
		}
		status := fit(string(s.Status), colStatus-1)
		if !selected {
			status = t.styles.statusStyle(s.Status).Render(status)
		}
		row := fit(marker, colMarker) + fit(s.ModuleName, t.module-1) + " " + fit(s.Version, colVersion-1) + " " +
			status + " " + availCell(s, aw) + fit(heartbeatAge(t.now, s), colLastBeat-1) + " " +
			fit(changed(t.now, s.changedAt), colChanged-1) + " " + fit(strings.Join(s.SupportedProtocols, ", "), protocols)
		row = strings.TrimRight(row, " ")
		if selected {
			row = t.styles.selected.Render(fit(row, t.width))
		}
		lines = append(lines, row)
	}
	return padLines(lines, t.height)
}

// availCell is a row's availability cell of width w (none when 0).
func availCell(e *entry, w int) string {
	if w == 0 {
		return ""
	}
	return fit(percent(e.available), w-1) + " "
}
