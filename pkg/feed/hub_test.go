package feed_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Watcher that keeps what it is sent and says when.
type recorder struct {
	mu        sync.Mutex
	events    []registry.Event
	bookmarks []registry.Position
	changed   chan struct{}
	fail      error
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1000)} }

func (r *recorder) Events(evs []registry.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.events = append(r.events, evs...)
	r.changed <- struct{}{}
	return nil
}

func (r *recorder) Bookmark(p registry.Position) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bookmarks = append(r.bookmarks, p)
	r.changed <- struct{}{}
	return nil
}

// waitFor waits until cond holds on what r received.
func (r *recorder) waitFor(t *testing.T, what string, cond func(evs []registry.Event, bms []registry.Position) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		ok := cond(r.events, r.bookmarks)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("%s: not within 10s; have %d events, %d bookmarks", what, len(r.events), len(r.bookmarks))
		}
	}
}

type bundle struct {
	store *memstore.Store
	clock *clockwork.FakeClock
	hub   *feed.Hub
	ctx   context.Context
}

func setup(t *testing.T, opts feed.Options) *bundle {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC))
	store := memstore.New(clock)
	opts.Source, opts.Clock = store, clock
	hub := feed.NewHub(opts)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &bundle{store: store, clock: clock, hub: hub, ctx: ctx}
}

func (b *bundle) register(t *testing.T, tenant uuid.UUID, module string) registry.Server {
	t.Helper()
	srv, _, _, err := b.store.Register(b.ctx, tenant, registry.ServerInfo{
		ModuleName: module, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// follow runs Follow in the background; its error arrives on the channel.
func (b *bundle) follow(t *testing.T, tenant uuid.UUID, f registry.EventFilter, from registry.Position, r *recorder) (context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	errc, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		errc <- b.hub.Follow(ctx, tenant, f, from, r)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return cancel, errc
}

func modules(evs []registry.Event) string {
	s := ""
	for _, ev := range evs {
		s += ev.ModuleName + ":" + string(ev.Kind)[len("mcp.server."):] + " "
	}
	return s
}

// A watch from the present gets what commits later, its tenant's only,
// filtered, once each and in order.
func TestFollowFromPresent(t *testing.T) {
	b := setup(t, feed.Options{})
	tenant, other := uuid.New(), uuid.New()
	b.register(t, tenant, "before")
	from, err := b.hub.Horizon(b.ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	all, alpha := newRecorder(), newRecorder()
	b.follow(t, tenant, registry.EventFilter{}, from, all)
	b.follow(t, tenant, registry.EventFilter{ModuleName: "alpha"}, from, alpha)
	a := b.register(t, tenant, "alpha")
	b.register(t, other, "alpha")
	b.register(t, tenant, "bravo")
	if _, _, err := b.store.Deregister(b.ctx, tenant, a.ServerID); err != nil {
		t.Fatal(err)
	}
	all.waitFor(t, "all events", func(evs []registry.Event, _ []registry.Position) bool { return len(evs) >= 3 })
	alpha.waitFor(t, "alpha's events", func(evs []registry.Event, _ []registry.Position) bool { return len(evs) >= 2 })
	if got := modules(all.events); got != "alpha:registered bravo:registered alpha:deregistered " {
		t.Fatalf("all: %s", got)
	}
	if got := modules(alpha.events); got != "alpha:registered alpha:deregistered " {
		t.Fatalf("alpha: %s", got)
	}
	for _, ev := range all.events {
		if ev.TenantID != tenant {
			t.Fatalf("another tenant's event: %+v", ev)
		}
	}
}

// A watch that resumes after any event it received gets exactly the rest,
// also after the ring dropped those events (it catches up from the store).
func TestFollowResumesWithoutGapOrDuplicate(t *testing.T) {
	b := setup(t, feed.Options{RingSize: 8})
	tenant := uuid.New()
	start, _ := b.hub.Horizon(b.ctx, tenant)
	for i := range 40 {
		b.register(t, tenant, fmt.Sprintf("m%02d", i))
	}
	first := newRecorder()
	b.follow(t, tenant, registry.EventFilter{}, start, first)
	first.waitFor(t, "40 events", func(evs []registry.Event, _ []registry.Position) bool { return len(evs) >= 40 })
	for _, cut := range []int{0, 5, 20, 39} {
		r := newRecorder()
		b.follow(t, tenant, registry.EventFilter{}, first.events[cut].Position, r)
		r.waitFor(t, "the rest", func(evs []registry.Event, _ []registry.Position) bool { return len(evs) >= 39-cut })
		if got, want := modules(r.events), modules(first.events[cut+1:]); got != want {
			t.Fatalf("after event %d:\n got  %s\n want %s", cut, got, want)
		}
	}
	// More events after the ring was trimmed reach every watcher once.
	for i := range 20 {
		b.register(t, tenant, fmt.Sprintf("n%02d", i))
	}
	first.waitFor(t, "60 events", func(evs []registry.Event, _ []registry.Position) bool { return len(evs) >= 60 })
	seen := map[uuid.UUID]bool{}
	for _, ev := range first.events {
		if seen[ev.EventID] {
			t.Fatalf("event %s twice", ev.EventID)
		}
		seen[ev.EventID] = true
	}
	if len(first.events) != 60 {
		t.Fatalf("%d events, want 60", len(first.events))
	}
}

// A silent watch is sent a bookmark every interval (the fake clock's), at
// least as recent as every event it was sent and, once the hub has read
// them, past the events its filter left out.
func TestBookmarks(t *testing.T) {
	b := setup(t, feed.Options{BookmarkInterval: 15 * time.Second})
	tenant := uuid.New()
	from, _ := b.hub.Horizon(b.ctx, tenant)
	r, all := newRecorder(), newRecorder()
	b.follow(t, tenant, registry.EventFilter{ModuleName: "alpha"}, from, r)
	b.follow(t, tenant, registry.EventFilter{}, from, all)
	b.register(t, tenant, "alpha")
	r.waitFor(t, "alpha", func(evs []registry.Event, _ []registry.Position) bool { return len(evs) == 1 })
	bravo := b.register(t, tenant, "bravo") // filtered out: moves the position on
	b.register(t, uuid.New(), "alpha")
	all.waitFor(t, "bravo", func(evs []registry.Event, _ []registry.Position) bool { return len(evs) == 2 })
	// The watch that sees everything may have had bravo from the store;
	// the intervals below pass in no time, so the hub reads it first.
	testwait.Eventually(t, "the hub read bravo", func() bool {
		current, err := b.hub.Current(b.ctx, tenant)
		return err == nil && current
	})
	if len(r.bookmarks) != 0 {
		t.Fatalf("a bookmark before the interval: %+v", r.bookmarks)
	}
	var past registry.Position
	for i := 0; i < 50 && past == (registry.Position{}); i++ {
		b.clock.Advance(15 * time.Second)
		r.waitFor(t, "a bookmark", func(_ []registry.Event, bms []registry.Position) bool { return len(bms) > i })
		bm := r.bookmarks[i]
		if bm.Compare(r.events[0].Position) < 0 {
			t.Fatalf("bookmark %+v before the event sent %+v", bm, r.events[0].Position)
		}
		if bm.Compare(all.events[1].Position) >= 0 {
			past = bm
		}
	}
	if past == (registry.Position{}) {
		t.Fatalf("no bookmark past bravo's registration (%s) in 50 intervals", bravo.ServerID)
	}
	// Resuming from the bookmark: nothing of alpha is after it.
	page, err := b.store.Events(b.ctx, tenant, registry.EventFilter{After: past, ModuleName: "alpha"})
	if err != nil || len(page.Events) != 0 {
		t.Fatalf("after the bookmark: %s %v", modules(page.Events), err)
	}
	if len(r.events) != 1 {
		t.Fatalf("events of alpha: %s", modules(r.events))
	}
}

// A sink that fails ends the watch with its error; a canceled watch ends
// with nil.
func TestFollowEnds(t *testing.T) {
	b := setup(t, feed.Options{})
	tenant := uuid.New()
	from, _ := b.hub.Horizon(b.ctx, tenant)
	broken := newRecorder()
	broken.fail = errors.New("client too slow")
	_, errc := b.follow(t, tenant, registry.EventFilter{}, from, broken)
	b.register(t, tenant, "alpha")
	select {
	case err := <-errc:
		if err == nil || err.Error() != "client too slow" {
			t.Fatalf("follow: %v, want the sink's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end on the sink's error")
	}
	cancel, errc := b.follow(t, tenant, registry.EventFilter{}, from, newRecorder())
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("canceled follow: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("canceled follow did not end")
	}
}

// Watches starting together share horizon reads: callers that come while
// a read runs wait for the next one, which starts after their call and so
// sees what committed before it. A read for one tenant is the store's
// Horizon; for several, one call of the store's (Horizons, or a feed
// read), each tenant with its own horizon.
func TestHorizonReadsShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := clockwork.NewFakeClock()
		store := memstore.New(clock)
		src := &routedSource{Store: store, tokens: make(chan struct{}, 2)}
		hub := feed.NewHub(feed.Options{Source: src, Clock: clock})
		ctx := t.Context()
		tenant, other := uuid.New(), uuid.New()

		type answer struct {
			tenant uuid.UUID
			pos    registry.Position
			err    error
		}
		ask := func(n int, tenants ...uuid.UUID) <-chan answer {
			out := make(chan answer, n)
			for i := range n {
				go func() {
					t := tenants[i%len(tenants)]
					p, err := hub.Horizon(ctx, t)
					out <- answer{t, p, err}
				}()
			}
			return out
		}
		register := func(tenant uuid.UUID, module string) {
			t.Helper()
			if _, _, _, err := store.Register(ctx, tenant, registry.ServerInfo{
				ModuleName: module, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0); err != nil {
				t.Fatal(err)
			}
		}
		first := ask(1, tenant)
		synctest.Wait() // the first read runs, held by the gate
		register(tenant, "m")
		register(other, "m1")
		register(other, "m2")
		later := ask(100, tenant, other)
		synctest.Wait() // every later caller waits
		// A token for the running read, one for the read the rest share.
		src.tokens <- struct{}{}
		src.tokens <- struct{}{}
		if a := <-first; a.err != nil {
			t.Fatal(a.err)
		}
		got := map[uuid.UUID]registry.Position{}
		for range 100 {
			b := <-later
			if b.err != nil {
				t.Fatal(b.err)
			}
			if p, ok := got[b.tenant]; ok && p != b.pos {
				t.Fatalf("callers of one read got %v and %v for one tenant", p, b.pos)
			}
			got[b.tenant] = b.pos
		}
		if horizon, feeds := src.reads(); horizon+len(feeds)+len(src.horizonsCalls()) != 2 {
			t.Fatalf("%d horizon reads for 101 callers, want 2 (one running, one shared by the rest)",
				horizon+len(feeds)+len(src.horizonsCalls()))
		}
		// Each tenant's horizon is past its own events, committed before
		// the call, and no further.
		for tenant, want := range map[uuid.UUID]int{tenant: 1, other: 2} {
			evs, err := store.Events(ctx, tenant, registry.EventFilter{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs.Events) != want || got[tenant] != evs.Events[want-1].Position {
				t.Fatalf("the shared read's horizon of a tenant %v, want its last event's position (%v)", got[tenant], evs.Events)
			}
		}
	})
}

// routedSource is a memstore whose horizon reads (Horizon for one tenant,
// Horizons and ReadFeed for several) are counted by kind and each wait for
// a token of tokens (a Horizon of hung: until hang is closed); the read of
// failing fails, and the store may say it routes each tenant's reads to a
// node of its own (store.TenantRouter), nodes[tenant].
type routedSource struct {
	*memstore.Store
	routed  bool
	tokens  chan struct{}
	failing uuid.UUID
	hung    uuid.UUID
	hang    chan struct{}
	nodes   map[uuid.UUID]int64
	mu      sync.Mutex
	horizon int
	apart   [][]uuid.UUID
	feed    [][]uuid.UUID
}

var _ store.TenantRouter = (*routedSource)(nil)

func (r *routedSource) TenantRouted(context.Context) bool { return r.routed }

func (r *routedSource) TenantNode(_ context.Context, tenant uuid.UUID) int64 { return r.nodes[tenant] }

func (r *routedSource) ReadFeed(ctx context.Context, tenants []uuid.UUID, after []registry.Position, limit int) ([]store.FeedBatch, error) {
	r.mu.Lock()
	r.feed = append(r.feed, slices.Clone(tenants))
	r.mu.Unlock()
	<-r.tokens
	return r.Store.ReadFeed(ctx, tenants, after, limit)
}

func (r *routedSource) Horizon(ctx context.Context, tenant uuid.UUID) (registry.Position, error) {
	r.mu.Lock()
	r.horizon++
	r.mu.Unlock()
	if tenant == r.hung {
		<-r.hang
	} else {
		<-r.tokens
	}
	if tenant == r.failing {
		return registry.Position{}, registry.ErrUnavailable
	}
	return r.Store.Horizon(ctx, tenant)
}

func (r *routedSource) Horizons(ctx context.Context, tenants []uuid.UUID) ([]registry.Position, []error) {
	r.mu.Lock()
	r.apart = append(r.apart, slices.Clone(tenants))
	r.mu.Unlock()
	<-r.tokens
	positions, errs := make([]registry.Position, len(tenants)), make([]error, len(tenants))
	for i, tenant := range tenants {
		if tenant == r.failing {
			errs[i] = registry.ErrUnavailable
			continue
		}
		positions[i], errs[i] = r.Store.Horizon(ctx, tenant)
	}
	return positions, errs
}

// horizonsCalls returns the tenants of each Horizons call so far.
func (r *routedSource) horizonsCalls() [][]uuid.UUID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.apart)
}

// reads returns the Horizon calls started so far and the feed reads.
func (r *routedSource) reads() (horizon int, feed [][]uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.horizon, slices.Clone(r.feed)
}

// A shared read of a few tenants is one call of the store's that reads
// each apart (Horizons): up to 32 tenants on a store that routes each
// tenant's reads to its own node (Citus), up to 8 on one that does not
// (plain PostgreSQL). Each caller gets its own tenant's position, and a
// tenant whose read fails fails its own callers alone. More tenants make
// one feed read.
func TestHorizonReadsApart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		routed  bool
		tenants int
		apart   bool
	}{
		{"routed, 32 tenants", true, 32, true},
		{"routed, 33 tenants", true, 33, false},
		{"not routed, 8 tenants", false, 8, true},
		{"not routed, 9 tenants", false, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := clockwork.NewFakeClock()
				st := memstore.New(clock)
				src := &routedSource{Store: st, routed: tc.routed, tokens: make(chan struct{}, 64)}
				hub := feed.NewHub(feed.Options{Source: src, Clock: clock})
				ctx := t.Context()
				// Tenant i has i+1 events: every position differs.
				tenants := make([]uuid.UUID, tc.tenants)
				want := make(map[uuid.UUID]registry.Position)
				for i := range tenants {
					tenants[i] = uuid.New()
					for j := range i + 1 {
						if _, _, _, err := st.Register(ctx, tenants[i], registry.ServerInfo{ModuleName: fmt.Sprintf("m%d", j),
							Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0); err != nil {
							t.Fatal(err)
						}
					}
					p, err := st.Horizon(ctx, tenants[i])
					if err != nil {
						t.Fatal(err)
					}
					want[tenants[i]] = p
				}
				src.failing = tenants[1]
				type answer struct {
					tenant uuid.UUID
					pos    registry.Position
					err    error
				}
				ask := func(tenants ...uuid.UUID) <-chan answer {
					out := make(chan answer, len(tenants))
					for _, tenant := range tenants {
						go func() {
							p, err := hub.Horizon(ctx, tenant)
							out <- answer{tenant, p, err}
						}()
					}
					return out
				}
				first := ask(uuid.New())
				synctest.Wait() // the first read runs, waiting for its token
				answers := ask(tenants...)
				synctest.Wait() // they wait for the next read
				src.tokens <- struct{}{}
				<-first
				synctest.Wait() // the next read has started every call it makes
				horizon, feeds := src.reads()
				apart := src.horizonsCalls()
				switch {
				case horizon != 1:
					t.Fatalf("%d Horizon calls, want the first read's alone", horizon)
				case tc.apart && (len(apart) != 1 || len(apart[0]) != tc.tenants || len(feeds) != 0):
					t.Fatalf("Horizons calls %v and feed reads %v, want one Horizons call of the %d tenants and none",
						apart, feeds, tc.tenants)
				case !tc.apart && (len(apart) != 0 || len(feeds) != 1 || len(feeds[0]) != tc.tenants):
					t.Fatalf("Horizons calls %v and feed reads %v, want none and one feed read of the %d tenants",
						apart, feeds, tc.tenants)
				}
				src.tokens <- struct{}{}
				for range tc.tenants {
					a := <-answers
					if a.tenant == src.failing && tc.apart {
						if !errors.Is(a.err, registry.ErrUnavailable) {
							t.Fatalf("the failing tenant's caller got %v, %v; want its own read's error", a.pos, a.err)
						}
						continue
					}
					if a.err != nil || a.pos != want[a.tenant] {
						t.Fatalf("tenant %s's caller got %v, %v; want %v", a.tenant, a.pos, a.err, want[a.tenant])
					}
				}
			})
		})
	}
}

// On a store that routes each tenant's reads to a node of its own
// (Citus), the horizon reads of one node's tenants do not wait for
// another node's: while the read of a tenant of a worker that hangs is
// under way, a tenant of another worker is read and answered at once. A
// tenant of the same worker waits for the next read of its node, as every
// caller of a store that does not route does.
func TestHorizonReadsOfANodeWaitForNoOtherNode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sameNode bool
	}{
		{"other worker", false},
		{"same worker", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := clockwork.NewFakeClock()
				st := memstore.New(clock)
				hung, running := uuid.New(), uuid.New()
				src := &routedSource{Store: st, routed: true, tokens: make(chan struct{}, 64),
					hung: hung, hang: make(chan struct{}), nodes: map[uuid.UUID]int64{hung: 1, running: 2}}
				if tc.sameNode {
					src.nodes[running] = 1
				}
				thaw := sync.OnceFunc(func() { close(src.hang) })
				defer thaw() // a failed test leaves no read hung in the bubble
				hub := feed.NewHub(feed.Options{Source: src, Clock: clock})
				ctx := t.Context()
				ask := func(tenant uuid.UUID) <-chan error {
					out := make(chan error, 1)
					go func() {
						_, err := hub.Horizon(ctx, tenant)
						out <- err
					}()
					return out
				}
				hungAnswer := ask(hung)
				synctest.Wait() // the hung tenant's read is under way
				src.tokens <- struct{}{}
				runningAnswer := ask(running)
				synctest.Wait()
				select {
				case err := <-runningAnswer:
					if tc.sameNode {
						t.Fatalf("a tenant of the hung worker was answered (%v) while its worker's read hung", err)
					}
					if err != nil {
						t.Fatalf("the other worker's tenant: %v", err)
					}
				default:
					if !tc.sameNode {
						t.Fatal("the other worker's tenant waited for the hung worker's read")
					}
				}
				thaw()
				if err := <-hungAnswer; err != nil {
					t.Fatalf("the hung tenant, once its worker answered: %v", err)
				}
				if tc.sameNode {
					if err := <-runningAnswer; err != nil {
						t.Fatalf("the hung worker's other tenant, at the next read: %v", err)
					}
				}
			})
		})
	}
}

// nodeSource is a routedSource that reads a node's tenants in its
// caller's goroutine (store.NodeHorizonsReader): NodeHorizons of the hung
// tenant waits until hang is closed, and every other is read at once; a
// call for tenants not all of the node it names fails the test.
type nodeSource struct {
	*routedSource
	t     *testing.T
	stall time.Duration
	node  [][]uuid.UUID
}

var _ store.NodeHorizonsReader = (*nodeSource)(nil)

func (n *nodeSource) NodeStall() time.Duration { return n.stall }

func (n *nodeSource) NodeHorizons(ctx context.Context, node int64, tenants []uuid.UUID) ([]registry.Position, []error) {
	for _, tenant := range tenants {
		if n.nodes[tenant] != node || node < 0 {
			n.t.Errorf("NodeHorizons of node %d for tenant %s of node %d", node, tenant, n.nodes[tenant])
		}
	}
	n.mu.Lock()
	n.node = append(n.node, slices.Clone(tenants))
	n.mu.Unlock()
	positions, errs := make([]registry.Position, len(tenants)), make([]error, len(tenants))
	for i, tenant := range tenants {
		if tenant == n.hung {
			<-n.hang
		}
		positions[i], errs[i] = n.Store.Horizon(ctx, tenant)
	}
	return positions, errs
}

// nodeCalls returns the tenants of each NodeHorizons call so far.
func (n *nodeSource) nodeCalls() [][]uuid.UUID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.node)
}

// On a store that routes each tenant's reads to a node of its own and
// reads a node's tenants in the hub's goroutine (store.NodeHorizonsReader:
// Citus), the hub reads them so, and bounds its callers' wait itself, as
// the store would: the callers of a tenant whose node hangs have
// ErrNodeStalled once the store's stall time has passed since the first
// of them came to their read (those who came during the hung read wait
// for the next, whose time starts then, and one who comes to a read
// whose time has passed has it at once), while another node's tenant is
// answered at once; once the node answers, so are its tenants. Tenants
// of no known node, and every tenant of a store that does not route
// (plain PostgreSQL), are read as before and bounded by the store.
func TestHorizonBoundsAHungNodeItself(t *testing.T) {
	t.Run("routed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const stall = 2 * time.Second
			clock := clockwork.NewFakeClock()
			st := memstore.New(clock)
			hung, running, unplaced := uuid.New(), uuid.New(), uuid.New()
			src := &nodeSource{routedSource: &routedSource{Store: st, routed: true, tokens: make(chan struct{}, 64),
				hung: hung, hang: make(chan struct{}), nodes: map[uuid.UUID]int64{hung: 1, running: 2, unplaced: -1}},
				t: t, stall: stall}
			hub := feed.NewHub(feed.Options{Source: src, Clock: clock})
			ctx := t.Context()
			want := make(map[uuid.UUID]registry.Position)
			for _, tenant := range []uuid.UUID{hung, running} {
				if _, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: "m",
					Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0); err != nil {
					t.Fatal(err)
				}
				p, err := st.Horizon(ctx, tenant)
				if err != nil || p.Seq == 0 {
					t.Fatal(p, err)
				}
				want[tenant] = p
			}
			type answer struct {
				pos registry.Position
				err error
			}
			ask := func(tenant uuid.UUID) <-chan answer {
				out := make(chan answer, 1)
				go func() {
					p, err := hub.Horizon(ctx, tenant)
					out <- answer{p, err}
				}()
				return out
			}
			answered := func(c <-chan answer) bool { return len(c) > 0 }
			first := ask(hung)
			synctest.Wait() // its read hangs
			clock.Advance(stall / 2)
			second := ask(hung)
			synctest.Wait() // it waits for the next read
			if a := <-ask(running); a.err != nil || a.pos != want[running] {
				t.Fatalf("the other node's tenant got %v, %v; want %v at once", a.pos, a.err, want[running])
			}
			clock.Advance(stall/2 - time.Nanosecond)
			synctest.Wait()
			if answered(first) || answered(second) {
				t.Fatal("a caller of the hung node was answered before the stall time")
			}
			clock.Advance(time.Nanosecond)
			synctest.Wait()
			if a := <-first; !errors.Is(a.err, feed.ErrNodeStalled) || !errors.Is(a.err, registry.ErrUnavailable) {
				t.Fatalf("the first caller got %v, %v after the stall time; want ErrNodeStalled", a.pos, a.err)
			}
			if answered(second) {
				t.Fatal("the second caller was answered before the stall time since it came")
			}
			clock.Advance(stall / 2)
			synctest.Wait()
			if a := <-second; !errors.Is(a.err, feed.ErrNodeStalled) {
				t.Fatalf("the second caller got %v, %v after the stall time; want ErrNodeStalled", a.pos, a.err)
			}
			if a := <-ask(hung); !errors.Is(a.err, feed.ErrNodeStalled) {
				t.Fatalf("a caller joining the stalled read got %v, %v; want ErrNodeStalled at once", a.pos, a.err)
			}
			src.tokens <- struct{}{}
			if a := <-ask(unplaced); a.err != nil {
				t.Fatalf("a tenant of no known node: %v, %v", a.pos, a.err)
			}
			if horizon, _ := src.reads(); horizon != 1 {
				t.Fatalf("%d Horizon calls for the tenant of no known node, want 1", horizon)
			}
			close(src.hang)
			synctest.Wait() // the hung read and the second's return
			if a := <-ask(hung); a.err != nil || a.pos != want[hung] {
				t.Fatalf("once the node answers, its tenant got %v, %v; want %v", a.pos, a.err, want[hung])
			}
			if horizon, feeds := src.reads(); horizon != 1 || len(feeds) != 0 || len(src.horizonsCalls()) != 0 {
				t.Fatalf("%d Horizon calls, Horizons %v, feed reads %v; want NodeHorizons alone for the placed tenants", horizon, src.horizonsCalls(), feeds)
			}
			if calls := src.nodeCalls(); len(calls) != 4 {
				t.Fatalf("NodeHorizons calls %v, want 4 of one tenant each (the hung read, the running tenant's, the second's, the last)", calls)
			}
		})
	})
	t.Run("not routed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			st := memstore.New(clock)
			tenant := uuid.New()
			src := &nodeSource{routedSource: &routedSource{Store: st, tokens: make(chan struct{}, 64)}, t: t, stall: time.Second}
			hub := feed.NewHub(feed.Options{Source: src, Clock: clock})
			src.tokens <- struct{}{}
			if _, err := hub.Horizon(t.Context(), tenant); err != nil {
				t.Fatal(err)
			}
			if horizon, _ := src.reads(); horizon != 1 || len(src.nodeCalls()) != 0 {
				t.Fatalf("%d Horizon calls and NodeHorizons %v; want one Horizon call, no NodeHorizons", horizon, src.nodeCalls())
			}
		})
	})
}
