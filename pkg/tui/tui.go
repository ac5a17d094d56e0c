package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// Source is where the board reads its data: the API, through the client.
type Source interface {
	// Servers returns every server of the tenant.
	Servers(ctx context.Context) ([]heartbeat.Server, error)
	// Events returns the latest limit audit events, oldest first.
	Events(ctx context.Context, limit int) ([]heartbeat.Event, error)
}

// Options configures the board.
type Options struct {
	In      io.Reader     // keys; nil: standard input
	Out     io.Writer     // the screen; nil: standard output
	Refresh time.Duration // between two reads of the API; 0: 2s
	NoColor bool          // no ANSI colour at all
	Now     func() time.Time
}

// Defaults and bounds of the board.
const (
	DefaultRefresh = 2 * time.Second
	// EventLimit is how many of the latest audit events the board asks for.
	EventLimit = 50
	// MinBackoff and MaxBackoff bound the wait before retrying a failed read.
	MinBackoff = time.Second
	MaxBackoff = 30 * time.Second

	fetchTimeout  = 10 * time.Second
	defaultWidth  = 80
	defaultHeight = 24
)

// Run shows the board until q, ctrl+c or the end of ctx; the end of ctx is
// not an error.
func Run(ctx context.Context, src Source, opts Options) error {
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	m := NewModel(src, opts)
	m.ctx = ctx
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithOutput(opts.Out), tea.WithAltScreen()}
	if opts.In != nil {
		popts = append(popts, tea.WithInput(opts.In))
	}
	_, err := tea.NewProgram(m, popts...).Run()
	if err != nil && ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	return nil
}

// state is where the board is in its life.
type state int

const (
	stateLoading state = iota // no answer yet
	stateError                // only failures so far
	stateReady                // data shown, maybe with a failure banner
)

// sortKey is the order of the servers table.
type sortKey int

const (
	sortModule sortKey = iota
	sortStatus         // unhealthy, degraded, healthy, deregistered
	sortAge            // the oldest last heartbeat first
	sortKeys
)

func (k sortKey) String() string {
	switch k {
	case sortStatus:
		return "status"
	case sortAge:
		return "age"
	default:
		return "module"
	}
}

// Messages. All I/O happens in commands that return one of these.
type (
	loadedMsg struct {
		servers []heartbeat.Server
		events  []heartbeat.Event
	}
	failedMsg  struct{ err error }
	refreshMsg struct{ seq int }
	clockMsg   struct{ now time.Time }
)

// Model is the board: a bubbletea model with a header, the servers table and
// the latest transitions.
type Model struct {
	src     Source
	ctx     context.Context
	nowFn   func() time.Time
	refresh time.Duration

	keys       keyMap
	filterKeys filterKeyMap
	styles     styles
	help       help.Model
	input      filterInput

	header header
	table  serverTable
	events eventPane

	state     state
	servers   []heartbeat.Server
	err       error
	failures  int
	retryAt   time.Time
	updatedAt time.Time
	now       time.Time
	fetching  bool
	seq       int

	width, height int
	filtering     bool
	module        string
	status        heartbeat.Status
	sort          sortKey
	showHelp      bool
}

// NewModel returns the board over src, before its first read.
func NewModel(src Source, opts Options) Model {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	st := newStyles(newRenderer(out, opts.NoColor))
	nowFn := opts.Now
	if nowFn == nil {
		nowFn = time.Now
	}
	refresh := opts.Refresh
	if refresh <= 0 {
		refresh = DefaultRefresh
	}

	h := help.New()
	h.Styles = help.Styles{
		ShortKey: st.helpKey, ShortDesc: st.helpDesc, ShortSeparator: st.dim, Ellipsis: st.dim,
		FullKey: st.helpKey, FullDesc: st.helpDesc, FullSeparator: st.dim,
	}

	m := Model{
		src: src, ctx: context.Background(), nowFn: nowFn, refresh: refresh,
		keys: defaultKeyMap(), filterKeys: defaultFilterKeyMap(), styles: st, help: h, input: newFilterInput(st),
		header: newHeader(st), table: newServerTable(st), events: newEventPane(st),
		fetching: true,
	}
	m = m.withNow(nowFn())
	m.setSize(defaultWidth, defaultHeight)
	return m
}

// Init starts the first read and the clock.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.fetch(), clockTick())
}

// Update applies one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.setSize(msg.Width, msg.Height)
		return m, nil

	case clockMsg:
		m = m.withNow(m.nowFn())
		return m, clockTick()

	case loadedMsg:
		m = m.withNow(m.nowFn())
		m.fetching = false
		m.state = stateReady
		m.err, m.failures, m.retryAt = nil, 0, time.Time{}
		m.updatedAt = m.now
		m.servers = msg.servers
		m.header, _ = m.header.Update(msg)
		m.events, _ = m.events.Update(msg)
		m.derive()
		return m, m.scheduleRefresh(m.refresh)

	case failedMsg:
		m = m.withNow(m.nowFn())
		m.fetching = false
		m.failures++
		m.err = msg.err
		if m.state == stateLoading {
			m.state = stateError
		}
		delay := Backoff(m.failures)
		m.retryAt = m.now.Add(delay)
		return m, m.scheduleRefresh(delay)

	case refreshMsg:
		if msg.seq != m.seq || m.fetching {
			return m, nil
		}
		m.fetching = true
		return m, m.fetch()

	case tea.KeyMsg:
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
			// Keys typed fast arrive together: take them one by one.
			return m.splitKeys(msg.Runes)
		}
		if m.filtering {
			return m.updateFilter(msg)
		}
		return m.updateKey(msg)
	}
	return m, nil
}

func (m Model) splitKeys(runes []rune) (tea.Model, tea.Cmd) {
	var next tea.Model = m
	cmds := make([]tea.Cmd, 0, len(runes))
	for _, r := range runes {
		var cmd tea.Cmd
		next, cmd = next.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
		cmds = append(cmds, cmd)
	}
	return next, tea.Batch(cmds...)
}

func (m Model) updateKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch {
	case key.Matches(msg, m.keys.Quit):
		return m, tea.Quit
	case key.Matches(msg, m.keys.Help):
		m.showHelp = !m.showHelp
	case key.Matches(msg, m.keys.Filter):
		m.filtering = true
		m.input.SetValue(m.module)
		return m, nil
	case key.Matches(msg, m.filterKeys.Clear):
		m.module = ""
		m.derive()
	case key.Matches(msg, m.keys.Sort):
		m.sort = (m.sort + 1) % sortKeys
		m.derive()
	case key.Matches(msg, m.keys.Healthy):
		m.setStatus(heartbeat.StatusHealthy)
	case key.Matches(msg, m.keys.Degraded):
		m.setStatus(heartbeat.StatusDegraded)
	case key.Matches(msg, m.keys.Unhealthy):
		m.setStatus(heartbeat.StatusUnhealthy)
	case key.Matches(msg, m.keys.Deregistered):
		m.setStatus(heartbeat.StatusDeregistered)
	case key.Matches(msg, m.keys.AllStatuses):
		m.setStatus("")
	case key.Matches(msg, m.keys.Refresh):
		m.seq++ // a pending timer is now stale
		if m.fetching {
			return m, nil
		}
		m.fetching = true
		return m, m.fetch()
	default:
		var cmd tea.Cmd
		m.table, cmd = m.table.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m Model) updateFilter(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch {
	case key.Matches(msg, m.filterKeys.Quit):
		return m, tea.Quit
	case key.Matches(msg, m.filterKeys.Clear):
		m.filtering = false
		m.input.SetValue("")
		m.module = ""
		m.derive()
		return m, nil
	case key.Matches(msg, m.filterKeys.Accept):
		m.filtering = false
		return m, nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	m.module = strings.TrimSpace(m.input.Value())
	m.derive()
	return m, cmd
}

func (m *Model) setStatus(s heartbeat.Status) {
	m.status = s
	m.derive()
}

// withNow sets the board's time and hands it to the children.
func (m Model) withNow(now time.Time) Model {
	m.now = now
	tick := clockMsg{now: now}
	m.table, _ = m.table.Update(tick)
	m.events, _ = m.events.Update(tick)
	return m
}

// derive recomputes the table's rows from the servers, filters and sort.
func (m *Model) derive() {
	rows := make([]heartbeat.Server, 0, len(m.servers))
	for _, s := range m.servers {
		if m.status != "" && s.Status != m.status {
			continue
		}
		if m.module != "" && !strings.Contains(s.ModuleName, m.module) {
			continue
		}
		rows = append(rows, s)
	}
	byModule := func(a, b heartbeat.Server) int {
		return cmp.Or(cmp.Compare(a.ModuleName, b.ModuleName), cmp.Compare(a.ServerID.String(), b.ServerID.String()))
	}
	switch m.sort {
	case sortStatus:
		slices.SortStableFunc(rows, func(a, b heartbeat.Server) int {
			return cmp.Or(cmp.Compare(statusRank(a.Status), statusRank(b.Status)), byModule(a, b))
		})
	case sortAge:
		slices.SortStableFunc(rows, func(a, b heartbeat.Server) int {
			return cmp.Or(a.LastHeartbeatAt.Compare(b.LastHeartbeatAt), byModule(a, b))
		})
	default:
		slices.SortStableFunc(rows, byModule)
	}
	empty := "no servers registered"
	if len(m.servers) > 0 {
		empty = "no servers match the filter (esc clears the module filter, 0 shows every status)"
	}
	m.table.SetServers(rows, empty)
}

// statusRank orders statuses by how much they need a look.
func statusRank(s heartbeat.Status) int {
	switch s {
	case heartbeat.StatusUnhealthy:
		return 0
	case heartbeat.StatusDegraded:
		return 1
	case heartbeat.StatusHealthy:
		return 2
	case heartbeat.StatusDeregistered:
		return 3
	}
	return 4
}

// Backoff is the wait before retry n (from 1) after failed reads: 1s
// doubling up to 30s.
func Backoff(n int) time.Duration {
	d := MinBackoff
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// setSize lays the children out in width x height cells: header, a banner
// line, the table, the transitions pane and the footer line.
func (m *Model) setSize(width, height int) {
	m.width, m.height = max(width, 20), max(height, 6)
	m.help.Width = m.width
	m.input.SetSize(m.width-26, 1)
	m.header.SetSize(m.width, m.header.Height())
	body := m.height - m.header.Height() - 2 // banner line, footer line
	eventsH := 0
	if body >= 12 {
		eventsH = min(body/3, 10) + 1
	}
	m.table.SetSize(m.width, body-eventsH)
	m.events.SetSize(m.width, eventsH)
}

func (m Model) fetch() tea.Cmd {
	src, ctx := m.src, m.ctx
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
		defer cancel()
		servers, err := src.Servers(ctx)
		if err != nil {
			return failedMsg{err: err}
		}
		events, err := src.Events(ctx, EventLimit)
		if err != nil {
			return failedMsg{err: fmt.Errorf("audit: %w", err)}
		}
		return loadedMsg{servers: servers, events: events}
	}
}

func (m Model) scheduleRefresh(d time.Duration) tea.Cmd {
	seq := m.seq
	return tea.Tick(d, func(time.Time) tea.Msg { return refreshMsg{seq: seq} })
}

func clockTick() tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return clockMsg{} })
}

// View renders the whole board, exactly width x height cells at most.
func (m Model) View() string {
	h := m.header
	h.info = headerInfo{refresh: m.refresh.String(), sort: m.sort, status: m.status, module: m.module,
		shown: len(m.table.rows)}
	if !m.updatedAt.IsZero() {
		h.info.updated = m.updatedAt.In(m.now.Location()).Format("15:04:05")
	}
	parts := []string{h.View(), m.bannerView()}
	switch m.state {
	case stateLoading:
		parts = append(parts, m.styles.dim.Render("  loading servers…"))
	case stateError:
		parts = append(parts, m.styles.dim.Render("  no data yet"))
	default:
		parts = append(parts, m.table.View())
		if m.events.height > 0 {
			parts = append(parts, m.events.View())
		}
	}
	lines := strings.Split(strings.Join(parts, "\n"), "\n")
	body := m.height - 1
	if len(lines) > body {
		lines = lines[:body]
	}
	for len(lines) < body {
		lines = append(lines, "")
	}
	lines = append(lines, m.footerView())
	for i, l := range lines {
		if ansi.StringWidth(l) > m.width {
			lines[i] = ansi.Truncate(l, m.width, "…")
		}
	}
	return strings.Join(lines, "\n")
}

// bannerView is the failure banner, or a blank line. The error is cut so
// that the retry countdown stays visible.
func (m Model) bannerView() string {
	if m.err == nil {
		return ""
	}
	retry := fmt.Sprintf(" (retrying in %ds) ", ceilSeconds(m.retryAt.Sub(m.now)))
	if m.fetching {
		retry = " (retrying now) "
	}
	const lead = " API unreachable: "
	reason := oneLine(m.err.Error())
	if room := m.width - len(lead) - len(retry); ansi.StringWidth(reason) > room {
		reason = ansi.Truncate(reason, max(room, 1), "…")
	}
	return m.styles.banner.Render(fit(lead+reason+retry, m.width))
}

// footerView is the filter input while typing, else the help line.
func (m Model) footerView() string {
	if m.filtering {
		return m.input.View() + m.styles.dim.Render("  enter keep · esc clear")
	}
	keys := helpKeys{board: m.keys, table: m.table.keys}
	if m.showHelp {
		return m.help.ShortHelpView(keys.FullHelp()[0])
	}
	left := m.help.ShortHelpView(keys.ShortHelp())
	return spread(left, m.styles.dim.Render(m.table.Position()), m.width)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
