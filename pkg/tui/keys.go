package tui

import "github.com/charmbracelet/bubbles/key"

// keyMap is the board's own keys; the table and the filter input have theirs.
type keyMap struct {
	Filter       key.Binding
	Sort         key.Binding
	Healthy      key.Binding
	Degraded     key.Binding
	Unhealthy    key.Binding
	Deregistered key.Binding
	AllStatuses  key.Binding
	Refresh      key.Binding
	Help         key.Binding
	Quit         key.Binding
}

func defaultKeyMap() keyMap {
	return keyMap{
		Filter:       key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter module")),
		Sort:         key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
		Healthy:      key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "healthy")),
		Degraded:     key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "degraded")),
		Unhealthy:    key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "unhealthy")),
		Deregistered: key.NewBinding(key.WithKeys("4"), key.WithHelp("4", "deregistered")),
		AllStatuses:  key.NewBinding(key.WithKeys("0"), key.WithHelp("0", "all")),
		Refresh:      key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh")),
		Help:         key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:         key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}

// filterKeyMap is what the filter input answers besides typing.
type filterKeyMap struct {
	Accept key.Binding
	Clear  key.Binding
	Quit   key.Binding
}

func defaultFilterKeyMap() filterKeyMap {
	return filterKeyMap{
		Accept: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "keep filter")),
		Clear:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear")),
		Quit:   key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
	}
}

// tableKeyMap moves the cursor of the servers table.
type tableKeyMap struct {
	Up       key.Binding
	Down     key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	Top      key.Binding
	Bottom   key.Binding
}

func defaultTableKeyMap() tableKeyMap {
	return tableKeyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "f", " "), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top")),
		Bottom:   key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "bottom")),
	}
}

// helpKeys is the board's help.KeyMap: the short form is a hint, the long
// form every key on one line.
type helpKeys struct {
	board keyMap
	table tableKeyMap
}

// ShortHelp is the hint shown while the help line is off.
func (h helpKeys) ShortHelp() []key.Binding {
	return []key.Binding{h.board.Help, h.board.Quit}
}

// FullHelp is every key, in one group, for the help line.
func (h helpKeys) FullHelp() [][]key.Binding {
	status := key.NewBinding(key.WithKeys("1", "2", "3", "4", "0"), key.WithHelp("1-4/0", "status/all"))
	return [][]key.Binding{{
		h.table.Up, h.table.Down, h.board.Filter, h.board.Sort, status,
		h.board.Refresh, h.board.Help, h.board.Quit,
	}}
}
