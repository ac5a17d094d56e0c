package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/backoff"
	"github.com/cyberos/mcpd/pkg/registry"
)

// Source is where the board reads its data: the API, through the client.
type Source interface {
	// List returns every server of the tenant and the position from which
	// a watch misses nothing that the list did not reflect (the first
	// page's watch_cursor).
	List(ctx context.Context) (Snapshot, error)
	// Server returns one server.
	Server(ctx context.Context, id uuid.UUID) (registry.Server, error)
	// Watch follows the tenant's audit events after cursor, calling fn
	// with each in commit order and state when the stream is up (nil) or
	// is being resumed (why), until ctx ends (nil) or the API refuses (an
	// error; ErrCursorExpired for a cursor it can no longer resume from).
	Watch(ctx context.Context, cursor string, fn func(registry.Event) error, state func(error)) error
}

// Snapshot is one full list of the tenant's servers.
type Snapshot struct {
	Servers []registry.Server
	// Cursor is where to watch from: the first page's watch_cursor.
	Cursor string
	// Availability is each server's available ratio of the last 24 hours
	// (GET /v1/mcp/availability); a server it lacks shows "-".
	Availability map[uuid.UUID]*float64
}

// Options configures the board.
type Options struct {
	In  io.Reader // keys; nil: standard input
	Out io.Writer // the screen; nil: standard output
	// Relist is the period of a full list besides the feed (the ages of
	// the last heartbeats, which the feed does not carry, are read again);
	// 0: never, the feed alone keeps the board current.
	Relist  time.Duration
	NoColor bool // no ANSI colour at all
	Now     func() time.Time
}

// Bounds of the board.
const (
	// EventLimit is how many of the latest transitions the board keeps.
	EventLimit = 200
	// MinBackoff and MaxBackoff bound the wait before retrying a failed list.
	MinBackoff = time.Second
	MaxBackoff = 30 * time.Second

	fetchTimeout  = 60 * time.Second
	defaultWidth  = 80
	defaultHeight = 24
)

// Run shows the board until q, ctrl+c or the end of ctx; the end of ctx is
// not an error.
func Run(ctx context.Context, src Source, opts Options) error {
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	// Ends the watch and any read in flight when the board quits.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
	stateLoading state = iota // no list yet
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
	listedMsg struct{ snap Snapshot }
	failedMsg struct{ err error }
	// serverMsg is a server fetched after the feed told of its
	// registration; touch is its entry's count of events at the fetch.
	serverMsg struct {
		srv   registry.Server
		touch uint64
		err   error
	}
	relistMsg struct{ seq int }
	clockMsg  struct{ now time.Time }
)

// entry is a server on the board and what the feed told of it.
type entry struct {
	registry.Server
	// changedAt is the time of its last transition the feed told of; zero
	// before one.
	changedAt time.Time
	// touch counts the events applied to it, so that a fetch that was
	// overtaken by the feed does not roll its status back.
	touch uint64
	// available is its available ratio of the last 24 hours, from the last
	// list; nil: not known.
	available *float64
}

// feedState is the connection to the change feed.
type feedState int

const (
	feedOff          feedState = iota // no watch (before a list, after a failure)
	feedConnecting                    // a watch started, no answer yet
	feedLive                          // the stream is up
	feedReconnecting                  // dropped, being resumed
)

// Model is the board: a bubbletea model with a header, the servers table and
// the latest transitions.
type Model struct {
	src    Source
	ctx    context.Context
	nowFn  func() time.Time
	relist time.Duration

	keys       keyMap
	filterKeys filterKeyMap
	styles     styles
	help       help.Model
	input      filterInput

	header header
	table  serverTable
	events eventPane

	state    state
	byID     map[uuid.UUID]*entry
	order    []*entry // by module name, as the API lists them
	err      error    // the last failed list, or a watch the API refused
	failures int
	retryAt  time.Time
	listedAt time.Time
	now      time.Time
	fetching bool
	seq      int

	feed      *feedPipe // the current watch; nil: none
	feedState feedState
	feedErr   error // why the stream is being resumed
	fetches   map[uuid.UUID]bool

	width, height int
	filtering     bool
	module        string
	status        registry.Status
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

	h := help.New()
	h.Styles = help.Styles{
		ShortKey: st.helpKey, ShortDesc: st.helpDesc, ShortSeparator: st.dim, Ellipsis: st.dim,
		FullKey: st.helpKey, FullDesc: st.helpDesc, FullSeparator: st.dim,
	}

	m := Model{
		src: src, ctx: context.Background(), nowFn: nowFn, relist: max(opts.Relist, 0),
		keys: defaultKeyMap(), filterKeys: defaultFilterKeyMap(), styles: st, help: h, input: newFilterInput(st),
		header: newHeader(st), table: newServerTable(st), events: newEventPane(st),
		byID: map[uuid.UUID]*entry{}, fetches: map[uuid.UUID]bool{},
		fetching: true,
	}
	m = m.withNow(nowFn())
	m.setSize(defaultWidth, defaultHeight)
	return m
}

// Init starts the first list and the clock.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.list(), m.clockTick())
}

// Update applies one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.setSize(msg.Width, msg.Height)
		return m, nil

	case clockMsg:
		m = m.withNow(m.nowFn())
		return m, m.clockTick()

	case listedMsg:
		return m.listed(msg.snap)

	case failedMsg:
		return m.failed(msg.err)

	case relistMsg:
		if msg.seq != m.seq || m.fetching {
			return m, nil
		}
		m.fetching = true
		return m, m.list()

	case feedMsg:
		if msg.pipe != m.feed || m.feed == nil {
			return m, nil // a watch the board has left
		}
		return m.applyFeed(msg)

	case serverMsg:
		return m.fetched(msg), nil

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

// listed replaces the servers by a full list and watches from its cursor;
// a watch in progress is left (the new one starts where the list stands).
func (m Model) listed(snap Snapshot) (tea.Model, tea.Cmd) {
	m = m.withNow(m.nowFn())
	m.fetching = false
	m.state = stateReady
	m.err, m.failures, m.retryAt = nil, 0, time.Time{}
	m.listedAt = m.now

	old := m.byID
	m.byID = make(map[uuid.UUID]*entry, len(snap.Servers))
	m.order = make([]*entry, 0, len(snap.Servers))
	for _, s := range snap.Servers {
		e := &entry{Server: s, available: snap.Availability[s.ServerID]}
		if prev, ok := old[s.ServerID]; ok {
			e.changedAt, e.touch = prev.changedAt, prev.touch
		}
		m.byID[s.ServerID] = e
		m.order = append(m.order, e)
	}
	// The API lists by module name; sort anyway, so that the order of
	// insertions below holds whatever the source.
	slices.SortStableFunc(m.order, byModule)
	m.table.ShowAvailability(snap.Availability != nil)
	m.fetches = map[uuid.UUID]bool{}
	m.derive()

	m.seq++ // a pending relist timer is now stale
	cmds := []tea.Cmd{m.startFeed(snap.Cursor)}
	if m.relist > 0 {
		cmds = append(cmds, m.scheduleRelist(m.relist))
	}
	return m, tea.Batch(cmds...)
}

// startFeed leaves the current watch and starts one from cursor.
func (m *Model) startFeed(cursor string) tea.Cmd {
	if m.feed != nil {
		m.feed.cancel()
	}
	p := newFeedPipe(m.ctx)
	m.feed, m.feedState, m.feedErr = p, feedConnecting, nil
	return tea.Batch(p.run(m.src, cursor), p.wait())
}

// stopFeed leaves the current watch.
func (m *Model) stopFeed() {
	if m.feed != nil {
		m.feed.cancel()
	}
	m.feed, m.feedState, m.feedErr = nil, feedOff, nil
}

func (m Model) failed(err error) (tea.Model, tea.Cmd) {
	m = m.withNow(m.nowFn())
	m.fetching = false
	m.failures++
	m.err = err
	if m.state == stateLoading {
		m.state = stateError
	}
	delay := Backoff(m.failures)
	m.retryAt = m.now.Add(delay)
	m.seq++
	return m, m.scheduleRelist(delay)
}

// applyFeed applies a batch of the watch: events, the stream's state, and
// its end (410: list again; another refusal: back off, then list again).
func (m Model) applyFeed(msg feedMsg) (tea.Model, tea.Cmd) {
	var cmds []tea.Cmd
	if len(msg.events) > 0 {
		m = m.withNow(m.nowFn())
		for i := range msg.events {
			if cmd := m.apply(&msg.events[i]); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
		m.events = m.events.add(msg.events)
		m.derive()
	}
	if msg.stateSeen {
		m.feedErr = msg.state
		m.feedState = feedLive
		if msg.state != nil {
			m.feedState = feedReconnecting
		}
	}
	if !msg.ended {
		return m, tea.Batch(append(cmds, m.feed.wait())...)
	}
	m.stopFeed()
	switch {
	case msg.err == nil:
		// The board's context ended: it is quitting.
	case errors.Is(msg.err, ErrCursorExpired):
		if !m.fetching {
			m.fetching = true
			m.seq++
			cmds = append(cmds, m.list())
		}
	default:
		next, cmd := m.failed(fmt.Errorf("watch: %w", msg.err))
		m = next.(Model)
		cmds = append(cmds, cmd)
	}
	return m, tea.Batch(cmds...)
}

// apply updates the board for one event; an event about a server the
// board does not know (its registration, after the list) adds a row made
// from the event at once and fetches the server for the rest.
func (m *Model) apply(ev *registry.Event) tea.Cmd {
	e, ok := m.byID[ev.ServerID]
	var cmd tea.Cmd
	if !ok {
		e = &entry{Server: registry.Server{
			ServerID: ev.ServerID, ModuleName: ev.ModuleName, Version: ev.Body.Version,
			SupportedProtocols: ev.Body.SupportedProtocols, TraceID: ev.TraceID,
			RegisteredAt: ev.OccurredAt, LastHeartbeatAt: ev.OccurredAt,
		}}
		m.byID[ev.ServerID] = e
		i, _ := slices.BinarySearchFunc(m.order, e, byModule)
		m.order = slices.Insert(m.order, i, e)
		if !m.fetches[ev.ServerID] {
			m.fetches[ev.ServerID] = true
			cmd = m.fetchServer(ev.ServerID, e.touch+1)
		}
	}
	e.touch++
	e.Status = ev.ToStatus
	e.changedAt = ev.OccurredAt
	// What the kind means, from registry.Kinds: a registration or a
	// recovery is a heartbeat; a registration may bring a new version.
	spec := ev.Kind.Spec()
	if spec.Heartbeat {
		e.LastHeartbeatAt = ev.OccurredAt
	}
	switch {
	case spec.To == registry.StatusDeregistered:
		at := ev.OccurredAt
		e.DeregisteredAt = &at
	case spec.Allows(registry.StatusDeregistered, ev.ToStatus):
		// A kind that brings a server back describes it anew.
		e.DeregisteredAt = nil
		if ev.Body.Version != "" {
			e.Version = ev.Body.Version
		}
		if len(ev.Body.SupportedProtocols) > 0 {
			e.SupportedProtocols = ev.Body.SupportedProtocols
		}
	}
	return cmd
}

// fetched fills the row of a server fetched after its registration, keeping
// the status the feed gave it since.
func (m Model) fetched(msg serverMsg) Model {
	id := msg.srv.ServerID
	if !m.fetches[id] {
		return m // a list since then is newer
	}
	delete(m.fetches, id)
	e, ok := m.byID[id]
	if msg.err != nil || !ok {
		return m // the row made from the event stays
	}
	status, deregisteredAt, heartbeatAt := e.Status, e.DeregisteredAt, e.LastHeartbeatAt
	e.Server = msg.srv
	if e.touch > msg.touch {
		// Events after the registration came in while fetching: they win.
		e.Status, e.DeregisteredAt = status, deregisteredAt
		if heartbeatAt.After(e.LastHeartbeatAt) {
			e.LastHeartbeatAt = heartbeatAt
		}
	}
	m.derive()
	return m
}

func (m Model) fetchServer(id uuid.UUID, touch uint64) tea.Cmd {
	src, ctx := m.src, m.ctx
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
		defer cancel()
		srv, err := src.Server(ctx, id)
		if err != nil {
			srv.ServerID = id
		}
		return serverMsg{srv: srv, touch: touch, err: err}
	}
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
		m.stopFeed()
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
		m.setStatus(registry.StatusHealthy)
	case key.Matches(msg, m.keys.Degraded):
		m.setStatus(registry.StatusDegraded)
	case key.Matches(msg, m.keys.Unhealthy):
		m.setStatus(registry.StatusUnhealthy)
	case key.Matches(msg, m.keys.Deregistered):
		m.setStatus(registry.StatusDeregistered)
	case key.Matches(msg, m.keys.AllStatuses):
		m.setStatus("")
	case key.Matches(msg, m.keys.Refresh):
		m.seq++ // a pending timer is now stale
		if m.fetching {
			return m, nil
		}
		m.fetching = true
		return m, m.list()
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
		m.stopFeed()
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

func (m *Model) setStatus(s registry.Status) {
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

func byModule(a, b *entry) int {
	return cmp.Or(cmp.Compare(a.ModuleName, b.ModuleName), cmp.Compare(a.ServerID.String(), b.ServerID.String()))
}

// derive recomputes the counts and the table's rows from the servers,
// filters and sort.
func (m *Model) derive() {
	var byRank [5]int // a map update per server costs more than the rest together
	for _, e := range m.order {
		byRank[statusRank(e.Status)]++
	}
	counts := make(map[registry.Status]int, len(registry.Statuses))
	for _, st := range registry.Statuses {
		counts[st] = byRank[statusRank(st)]
	}
	m.header.SetCounts(counts, len(m.order))

	rows := m.order
	if m.status != "" || m.module != "" || m.sort != sortModule {
		rows = make([]*entry, 0, len(m.order))
		for _, e := range m.order {
			if m.status != "" && e.Status != m.status {
				continue
			}
			if m.module != "" && !strings.Contains(e.ModuleName, m.module) {
				continue
			}
			rows = append(rows, e)
		}
	}
	switch m.sort {
	case sortStatus:
		// By status, then module: the rows are in module order already, so
		// one pass into a bucket per status does it without comparing.
		var buckets [5][]*entry
		for _, e := range rows {
			r := statusRank(e.Status)
			buckets[r] = append(buckets[r], e)
		}
		rows = slices.Concat(buckets[:]...)
	case sortAge:
		slices.SortStableFunc(rows, func(a, b *entry) int {
			return a.LastHeartbeatAt.Compare(b.LastHeartbeatAt)
		})
	}
	empty := "no servers registered"
	if len(m.order) > 0 {
		empty = "no servers match the filter (esc clears the module filter, 0 shows every status)"
	}
	m.table.SetRows(rows, empty)
}

// statusRank orders statuses by how much they need a look.
func statusRank(s registry.Status) int {
	switch s {
	case registry.StatusUnhealthy:
		return 0
	case registry.StatusDegraded:
		return 1
	case registry.StatusHealthy:
		return 2
	case registry.StatusDeregistered:
		return 3
	}
	return 4
}

// Backoff is the wait before retry n (from 1) after failed reads: 1s
// doubling up to 30s.
func Backoff(n int) time.Duration {
	return backoff.Exponential(MinBackoff, MaxBackoff, n)
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

// list is the command that reads every server.
func (m Model) list() tea.Cmd {
	src, ctx := m.src, m.ctx
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
		defer cancel()
		snap, err := src.List(ctx)
		if err != nil {
			return failedMsg{err: err}
		}
		return listedMsg{snap: snap}
	}
}

func (m Model) scheduleRelist(d time.Duration) tea.Cmd {
	seq := m.seq
	return m.after(d, relistMsg{seq: seq})
}

func (m Model) clockTick() tea.Cmd { return m.after(time.Second, clockMsg{}) }

// after is a tea.Tick that also ends with the board's context, so that no
// timer outlives Run.
func (m Model) after(d time.Duration, msg tea.Msg) tea.Cmd {
	ctx := m.ctx
	return func() tea.Msg {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return msg
		case <-ctx.Done():
			return nil
		}
	}
}

// View renders the whole board, exactly width x height cells at most.
func (m Model) View() string {
	h := m.header
	h.info = headerInfo{sort: m.sort, status: m.status, module: m.module, shown: len(m.table.rows),
		feed: m.feedState}
	if !m.listedAt.IsZero() {
		h.info.listed = m.listedAt.In(m.now.Location()).Format("15:04:05")
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
	lead, reason, tail := "", "", ""
	switch {
	case m.err != nil:
		lead, reason = " API unreachable: ", m.err.Error()
		tail = fmt.Sprintf(" (retrying in %ds) ", ceilSeconds(m.retryAt.Sub(m.now)))
		if m.fetching {
			tail = " (retrying now) "
		}
	case m.feedState == feedReconnecting:
		lead, reason, tail = " Feed lost: ", "", " (reconnecting…) "
		if m.feedErr != nil {
			reason = cause(m.feedErr)
		}
	default:
		return ""
	}
	reason = oneLine(reason)
	if room := m.width - len(lead) - len(tail); ansi.StringWidth(reason) > room {
		reason = ansi.Truncate(reason, max(room, 1), "…")
	}
	return m.styles.banner.Render(fit(lead+reason+tail, m.width))
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

// cause is what went wrong, without the request that a *url.Error names.
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
