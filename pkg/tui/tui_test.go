package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
)

var t0 = time.Date(2026, 5, 17, 10, 0, 30, 0, time.UTC)

// fakeSource answers with fixed data, or err when set; its watch waits for
// the end of its context.
type fakeSource struct {
	mu       sync.Mutex
	servers  []registry.Server
	cursor   string
	err      error
	calls    int
	watches  []string      // the cursors watched from
	called   chan struct{} // closed at the first call, when set
	watching chan struct{} // closed at the first watch, when set
}

func (f *fakeSource) List(context.Context) (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.called != nil && f.calls == 1 {
		close(f.called)
	}
	if f.err != nil {
		return Snapshot{}, f.err
	}
	cursor := f.cursor
	if cursor == "" {
		cursor = fmt.Sprintf("list-%d", f.calls)
	}
	return Snapshot{Servers: slices.Clone(f.servers), Cursor: cursor}, nil
}

func (f *fakeSource) Server(_ context.Context, id uuid.UUID) (registry.Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.servers {
		if s.ServerID == id {
			return s, nil
		}
	}
	return registry.Server{}, errors.New("not found")
}

func (f *fakeSource) Watch(ctx context.Context, cursor string, _ func(registry.Event) error, state func(error)) error {
	f.mu.Lock()
	f.watches = append(f.watches, cursor)
	if f.watching != nil && len(f.watches) == 1 {
		close(f.watching)
	}
	f.mu.Unlock()
	state(nil)
	<-ctx.Done()
	return nil
}

func (f *fakeSource) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func server(module, version string, st registry.Status, ago time.Duration) registry.Server {
	return registry.Server{
		ServerID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(module)), ModuleName: module, Version: version,
		SupportedProtocols: []string{"2025-06-18", "2025-03-26"}, Status: st,
		LastHeartbeatAt: t0.Add(-ago), RegisteredAt: t0.Add(-time.Hour), HeartbeatIntervalSecs: 10,
	}
}

func event(kind registry.EventKind, module string, from *registry.Status, to registry.Status, ago time.Duration) registry.Event {
	id := uuid.NewSHA1(uuid.NameSpaceOID, []byte(module))
	return registry.Event{EventID: uuid.New(), Kind: kind, ServerID: id, ModuleName: module, FromStatus: from, ToStatus: to,
		OccurredAt: t0.Add(-ago), Body: registry.EventBody{ServerID: id, ModuleName: module, Status: to, Version: "9.9.9",
			SupportedProtocols: []string{"2025-06-18"}}}
}

func ptr(s registry.Status) *registry.Status { return &s }

func newFake() *fakeSource {
	return &fakeSource{
		servers: []registry.Server{
			server("search", "0.9.1", registry.StatusUnhealthy, 60*time.Second),
			server("calendar", "1.3.2", registry.StatusHealthy, 5*time.Second),
			server("weather", "1.0.0", registry.StatusDeregistered, 150*time.Second),
			server("mail", "2.0.0", registry.StatusDegraded, 32*time.Second),
			server("calendar-sync", "0.1.0", registry.StatusHealthy, 2*time.Second),
		},
	}
}

// events are transitions of the fake's servers, as the feed brings them.
func events() []registry.Event {
	return []registry.Event{
		event(registry.KindRegistered, "calendar", nil, registry.StatusHealthy, 50*time.Minute),
		event(registry.KindDegraded, "mail", ptr(registry.StatusHealthy), registry.StatusDegraded, 12*time.Second),
		event(registry.KindUnhealthy, "search", ptr(registry.StatusDegraded), registry.StatusUnhealthy, 30*time.Second),
		event(registry.KindDeregistered, "weather", ptr(registry.StatusHealthy), registry.StatusDeregistered, 2*time.Minute),
	}
}

// board is a model under test with a clock the test moves.
type board struct {
	t   *testing.T
	m   Model
	now time.Time
	cmd tea.Cmd
}

func newBoard(t *testing.T, src Source) *board {
	t.Helper()
	b := &board{t: t, now: t0}
	b.m = NewModel(src, Options{Out: io.Discard, NoColor: true, Now: func() time.Time { return b.now }})
	b.send(tea.WindowSizeMsg{Width: 100, Height: 30})
	return b
}

func (b *board) send(msg tea.Msg) *board {
	b.t.Helper()
	next, cmd := b.m.Update(msg)
	m, ok := next.(Model)
	if !ok {
		b.t.Fatalf("Update returned %T, want Model", next)
	}
	b.m, b.cmd = m, cmd
	return b
}

// load runs the model's own list command and feeds its message back.
func (b *board) load() *board {
	b.t.Helper()
	return b.send(b.m.list()())
}

// feed delivers a batch of the current watch.
func (b *board) feed(msg feedMsg) *board {
	b.t.Helper()
	if b.m.feed == nil {
		b.t.Fatal("no watch to feed")
	}
	msg.pipe = b.m.feed
	return b.send(msg)
}

// events delivers events of the current watch.
func (b *board) events(evs ...registry.Event) *board {
	b.t.Helper()
	return b.feed(feedMsg{events: evs})
}

func (b *board) keys(s string) *board {
	b.t.Helper()
	for _, r := range s {
		b.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	return b
}

func (b *board) key(k tea.KeyType) *board {
	b.t.Helper()
	return b.send(tea.KeyMsg{Type: k})
}

func (b *board) view() string {
	b.t.Helper()
	v := b.m.View()
	lines := strings.Split(v, "\n")
	if len(lines) != b.m.height {
		b.t.Fatalf("view has %d lines, want %d:\n%s", len(lines), b.m.height, v)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > b.m.width {
			b.t.Fatalf("line %d is %d cells wide, want at most %d: %q", i, w, b.m.width, l)
		}
	}
	return v
}

func (b *board) contains(want ...string) {
	b.t.Helper()
	v := b.view()
	for _, w := range want {
		if !strings.Contains(v, w) {
			b.t.Fatalf("view lacks %q:\n%s", w, v)
		}
	}
}

func (b *board) lacks(unwanted ...string) {
	b.t.Helper()
	v := b.view()
	for _, w := range unwanted {
		if strings.Contains(v, w) {
			b.t.Fatalf("view has %q:\n%s", w, v)
		}
	}
}

// rowOrder is the order in which modules appear in the table rows.
func (b *board) rowOrder() []string {
	b.t.Helper()
	var got []string
	inTable := false
	for _, l := range strings.Split(b.view(), "\n") {
		if strings.Contains(l, "MODULE") && strings.Contains(l, "STATUS") {
			inTable = true
			continue
		}
		if strings.HasPrefix(l, "──") {
			break
		}
		if f := strings.Fields(strings.TrimPrefix(l, ">")); inTable && len(f) > 0 {
			got = append(got, f[0])
		}
	}
	return got
}

func (b *board) order(want ...string) {
	b.t.Helper()
	if got := b.rowOrder(); strings.Join(got, " ") != strings.Join(want, " ") {
		b.t.Fatalf("rows %v, want %v:\n%s", got, want, b.view())
	}
}

func TestLoadingThenReady(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake())
	b.contains("loading servers", "waiting for the API")

	b.load()
	if b.cmd == nil {
		t.Fatal("no refresh scheduled after an answer")
	}
	b.contains(
		"mcpctl watch · 5 servers",
		"listed 10:00:30 · connecting to the feed",
		"healthy 2   degraded 1   unhealthy 1   deregistered 1",
		"sort: module · 5 shown",
		"  MODULE             VERSION     STATUS        LAST HEARTBEAT  CHANGED     PROTOCOLS",
		"> calendar           1.3.2       healthy       5s ago          -           2025-06-18, 2025-03-26",
		"  mail               2.0.0       degraded      32s ago         -           2025-06-18, 2025-03-26",
		"  search             0.9.1       unhealthy     1m00s ago       -",
		"  weather            1.0.0       deregistered  2m30s ago       -",
		"── latest transitions",
		"no transitions since the board started",
		"? help • q quit",
		"1-5 of 5",
	)
	b.order("calendar", "calendar-sync", "mail", "search", "weather")
	b.lacks("API unreachable", "\x1b[")

	// The feed is up: the header says so.
	b.feed(feedMsg{stateSeen: true})
	b.contains("listed 10:00:30 · live")
}

func TestAgesTickEverySecond(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	b.contains("5s ago")
	b.now = b.now.Add(3 * time.Second)
	b.send(clockMsg{})
	if b.cmd == nil {
		t.Fatal("clock tick not re-armed")
	}
	b.contains("healthy       8s ago", "unhealthy     1m03s ago", "listed 10:00:30")
	b.lacks("healthy       2s ago", "1m00s ago")
}

func TestModuleFilter(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	b.keys("/cal")
	b.contains("/cal", "enter keep · esc clear", `module: "cal"`, "2 shown")
	b.order("calendar", "calendar-sync")

	b.keys("q") // typed into the filter, not a quit
	if b.cmd != nil {
		t.Fatal("q while filtering returned a command")
	}
	b.contains("no servers match the filter", "0 shown")
	b.lacks("> calendar")
	b.key(tea.KeyBackspace)
	b.key(tea.KeyEnter)
	b.contains(`module: "cal"`, "? help • q quit")
	b.order("calendar", "calendar-sync")

	b.key(tea.KeyEsc) // esc clears an applied filter too
	b.lacks("module:")
	b.order("calendar", "calendar-sync", "mail", "search", "weather")

	b.keys("/sea").key(tea.KeyEsc)
	b.lacks("module:")
	b.order("calendar", "calendar-sync", "mail", "search", "weather")
}

func TestStatusFilterKeys(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	for _, tc := range []struct {
		key  string
		rows []string
		mark string
	}{
		{"1", []string{"calendar", "calendar-sync"}, "[healthy 2]"},
		{"2", []string{"mail"}, "[degraded 1]"},
		{"3", []string{"search"}, "[unhealthy 1]"},
		{"4", []string{"weather"}, "[deregistered 1]"},
		{"0", []string{"calendar", "calendar-sync", "mail", "search", "weather"}, "healthy 2   degraded"},
	} {
		b.keys(tc.key)
		b.order(tc.rows...)
		b.contains(tc.mark)
	}
	b.lacks("status:")
}

func TestSortCycles(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	b.keys("s")
	b.contains("sort: status")
	b.order("search", "mail", "calendar", "calendar-sync", "weather")
	b.keys("s")
	b.contains("sort: age")
	b.order("weather", "search", "mail", "calendar", "calendar-sync")
	b.keys("s")
	b.contains("sort: module")
	b.order("calendar", "calendar-sync", "mail", "search", "weather")
}

func TestCursorMovesAndSticks(t *testing.T) {
	t.Parallel()
	src := newFake()
	b := newBoard(t, src).load()
	b.contains("> calendar ")
	b.keys("j").key(tea.KeyDown)
	b.contains("> mail ")
	b.keys("k")
	b.contains("> calendar-sync")
	b.keys("G")
	b.contains("> weather")
	b.key(tea.KeyUp)
	b.contains("> search")

	// The cursor follows its server across a refresh that reorders rows.
	src.servers = append(src.servers, server("archive", "1.0.0", registry.StatusHealthy, time.Second))
	b.load()
	b.contains("> search", "6 servers")
}

func TestScrollKeepsCursorVisible(t *testing.T) {
	t.Parallel()
	src := &fakeSource{}
	for i := range 40 {
		src.servers = append(src.servers, server(fmt.Sprintf("mod-%02d", i), "1.0.0", registry.StatusHealthy, time.Second))
	}
	b := newBoard(t, src).load()
	b.contains("1-16 of 40")
	b.keys("G")
	b.contains("> mod-39", "25-40 of 40")
	b.lacks("mod-00 ")
	b.keys("g")
	b.contains("> mod-00", "1-16 of 40")
}

func TestHelpToggle(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	b.lacks("filter module")
	b.keys("?")
	b.contains("↑/k up • ↓/j down • / filter module • s sort • 1-4/0 status/all • r refresh • ? help • q quit")
	b.keys("?")
	b.lacks("filter module")
}

func TestQuitKeys(t *testing.T) {
	t.Parallel()
	for _, msg := range []tea.KeyMsg{
		{Type: tea.KeyRunes, Runes: []rune{'q'}},
		{Type: tea.KeyCtrlC},
	} {
		b := newBoard(t, newFake()).load()
		b.send(msg)
		if b.cmd == nil {
			t.Fatalf("%s: no command", msg)
		}
		if _, ok := b.cmd().(tea.QuitMsg); !ok {
			t.Fatalf("%s: command is not tea.Quit", msg)
		}
	}
	b := newBoard(t, newFake()).load().keys("/x")
	b.key(tea.KeyCtrlC)
	if b.cmd == nil {
		t.Fatal("ctrl+c while filtering: no command")
	}
	if _, ok := b.cmd().(tea.QuitMsg); !ok {
		t.Fatal("ctrl+c while filtering is not tea.Quit")
	}
}

func TestFailingSourceShowsBannerAndBacksOff(t *testing.T) {
	t.Parallel()
	src := newFake()
	src.setErr(errors.New("dial tcp 127.0.0.1:8420: connect: connection refused"))
	b := newBoard(t, src)

	for i, want := range []int{1, 2, 4, 8, 16, 30, 30} {
		if i == 0 {
			b.load() // the first read, that Init starts
		} else {
			b.send(relistMsg{seq: b.m.seq}) // the retry timer fires
			if b.cmd == nil {
				t.Fatal("no read after the retry timer")
			}
			b.send(b.cmd())
		}
		if b.cmd == nil {
			t.Fatal("no retry scheduled after a failure")
		}
		b.contains(fmt.Sprintf("API unreachable: dial tcp 127.0.0.1:8420: connect: connection refused (retrying in %ds)", want),
			"no data yet")
	}
	if b.m.state != stateError {
		t.Fatalf("state %v, want error", b.m.state)
	}

	// The countdown follows the clock.
	b.now = b.now.Add(12 * time.Second)
	b.send(clockMsg{})
	b.contains("(retrying in 18s)")

	// A stale timer, or one while a read is in flight, starts no second read.
	b.send(relistMsg{seq: b.m.seq - 1})
	if b.cmd != nil {
		t.Fatal("a stale refresh started a read")
	}

	src.setErr(nil)
	b.keys("r")
	if b.cmd == nil {
		t.Fatal("r started no read")
	}
	b.send(b.cmd())
	b.lacks("API unreachable")
	b.contains("> calendar")
	if b.m.failures != 0 {
		t.Fatalf("failures %d after a success, want 0", b.m.failures)
	}
}

func TestBannerKeepsCountdownVisible(t *testing.T) {
	t.Parallel()
	src := newFake()
	src.setErr(errors.New(`list servers: Get "http://127.0.0.1:8420/v1/mcp/servers": dial tcp 127.0.0.1:8420: connect: connection refused`))
	b := newBoard(t, src).load()
	b.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	b.contains(` API unreachable: list servers: Get "http://127.0.0.1:8420/v1… (retrying in 1s) `)
}

func TestErrorKeepsLastData(t *testing.T) {
	t.Parallel()
	src := newFake()
	b := newBoard(t, src).load()
	src.setErr(errors.New("connection reset by peer"))
	b.load()
	b.contains("API unreachable: connection reset by peer (retrying in 1s)", "> calendar", "search", "── latest transitions",
		"healthy 2   degraded 1")
	if b.m.state != stateReady {
		t.Fatalf("state %v, want ready", b.m.state)
	}
	b.load()
	b.contains("(retrying in 2s)", "> calendar")

	src.setErr(nil)
	b.load()
	b.lacks("API unreachable")
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i, w := range want {
		if got := Backoff(i + 1); got != w*time.Second {
			t.Fatalf("Backoff(%d) = %s, want %s", i+1, got, w*time.Second)
		}
	}
	if got := Backoff(1000); got != MaxBackoff {
		t.Fatalf("Backoff(1000) = %s", got)
	}
}

func TestResize(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	b.send(tea.WindowSizeMsg{Width: 60, Height: 12})
	b.contains("mcpctl watch", "> calendar", "? help")
	b.lacks("latest transitions") // too short for the pane
	b.events(events()...)
	b.send(tea.WindowSizeMsg{Width: 140, Height: 40})
	b.contains("latest transitions", "mcp.server.deregistered", "2025-06-18, 2025-03-26")
}

func TestColour(t *testing.T) {
	// Not parallel: the environment decides the colour profile.
	t.Setenv("CLICOLOR_FORCE", "1")
	newBoardColour := func(noColor bool) string {
		m := NewModel(newFake(), Options{Out: io.Discard, NoColor: noColor, Now: func() time.Time { return t0 }})
		next, _ := m.Update(m.list()())
		return next.View()
	}
	if v := newBoardColour(false); !strings.Contains(v, "\x1b[") {
		t.Fatalf("no ANSI colour with CLICOLOR_FORCE:\n%q", v)
	}
	if v := newBoardColour(true); strings.Contains(v, "\x1b[") {
		t.Fatalf("ANSI escapes with NoColor:\n%q", v)
	}
	t.Setenv("NO_COLOR", "1")
	if v := newBoardColour(false); strings.Contains(v, "\x1b[") {
		t.Fatalf("ANSI escapes with NO_COLOR:\n%q", v)
	}
}

func TestRunQuitsOnQ(t *testing.T) {
	t.Parallel()
	src := newFake()
	src.called = make(chan struct{})
	in, w := io.Pipe()
	defer w.Close()
	var out testlog.Buffer
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), src, Options{In: in, Out: &out, NoColor: true}) }()
	select {
	case <-src.called:
	case <-time.After(5 * time.Second):
		t.Fatal("Run never read the source")
	}
	if _, err := w.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end on q")
	}
	if !strings.Contains(out.String(), "mcpctl watch") {
		t.Fatalf("nothing rendered:\n%q", out.String())
	}
}

func TestRunEndsWithContext(t *testing.T) {
	t.Parallel()
	src := newFake()
	src.called = make(chan struct{})
	in, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, src, Options{In: in, Out: io.Discard, NoColor: true}) }()
	<-src.called
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end with its context")
	}
}

func TestKeysTypedTogether(t *testing.T) {
	t.Parallel()
	b := newBoard(t, newFake()).load()
	b.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("ss")})
	b.contains("sort: age")
	b.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("s/cal")})
	b.contains("sort: module", `module: "cal"`, "/cal")
	b.order("calendar", "calendar-sync")
	b.key(tea.KeyEnter)
	b.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("3q")})
	b.contains("[unhealthy 1]")
	if b.cmd == nil {
		t.Fatal("3q: no command")
	}
	if _, ok := b.cmd().(tea.QuitMsg); !ok {
		t.Fatal("3q did not quit")
	}
}
