package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Source is the store's side of the feed: every tenant's trail as it
// commits, and one tenant's trail to catch a watch up.
type Source interface {
	store.FeedReader
	Events(ctx context.Context, tenant uuid.UUID, f registry.EventFilter) (registry.EventPage, error)
}

// Defaults of Options.
const (
	DefaultPollInterval     = 100 * time.Millisecond
	DefaultRingSize         = 16384
	DefaultBookmarkInterval = 15 * time.Second
	// readLimit bounds the events of one poll and of one catch-up page.
	readLimit = 1000
)

// ErrReset ends every watch when the store's history changed under the
// hub (a database failover): watchers resume from their last position,
// which the store checks again.
var ErrReset = errors.New("the feed's history changed; resume from the last position")

// ErrNodeStalled answers Horizon when the read of the tenant's node ran
// the store's stall time without an answer (store.NodeHorizonsReader); it
// is a registry.ErrUnavailable.
var ErrNodeStalled = fmt.Errorf("%w: the tenant's node did not answer in time", registry.ErrUnavailable)

// Options configures a Hub.
type Options struct {
	Source Source
	// Clock drives polls and bookmarks; nil: the real clock.
	Clock  clockwork.Clock
	Logger *slog.Logger
	// PollInterval is the time between two reads when the store cannot say
	// when an event commits; default DefaultPollInterval.
	PollInterval time.Duration
	// RingSize bounds the events kept for watchers; default DefaultRingSize.
	RingSize int
	// BookmarkInterval is the silence after which a watcher is sent a
	// bookmark; default DefaultBookmarkInterval.
	BookmarkInterval time.Duration
	// OnPoll, when set, is called after every read of the store with the
	// events read and its error (metrics, tests).
	OnPoll func(events int, err error)
}

// Hub reads the feed once for every watcher of the process. Positions
// belong to a tenant, so the hub follows only the tenants that need it:
// those with watchers (Follow) and those whose version was asked lately
// (TenantVersion); every poll reads all of them in one read of the store.
type Hub struct {
	src      Source
	clock    clockwork.Clock
	logger   *slog.Logger
	poll     time.Duration
	ringSize int
	bookmark time.Duration
	onPoll   func(int, error)

	mu sync.RWMutex
	// tenants are the tenants followed.
	tenants map[uuid.UUID]*tenantFeed
	// epoch is the store's history of the last read (0: none yet).
	epoch uint64
	// started is closed once Run runs.
	started chan struct{}
	// reset is closed, and replaced, when the history changed.
	reset chan struct{}
	// added is signalled when a tenant starts to be followed, so that Run
	// reads it without waiting for a poll.
	added chan struct{}
	// recent holds the ids of the events read last, so that Wrote can
	// tell an event the hub has read already.
	recent recentIDs
	// observer, when set, is told of every event read (Observe).
	observer Observer
	// router is src when the store says how it routes reads
	// (store.TenantRouter), else nil.
	router store.TenantRouter
	// apart is src when it reads several tenants' horizons each apart in
	// one call (store.HorizonsReader), else nil; node, when it reads a
	// node's tenants in the reader's goroutine (store.NodeHorizonsReader).
	apart store.HorizonsReader
	node  store.NodeHorizonsReader

	// hmu guards the shared horizon reads: horizons holds the queue of
	// each node whose tenants' horizons are being read.
	hmu      sync.Mutex
	horizons map[int64]*horizonQueue
}

// horizonQueue is the horizon reads of one node's tenants (Hub.horizonNode),
// made one at a time: next is the read that callers now wait for, not yet
// started.
type horizonQueue struct {
	next *horizonRead
}

// tenantFeed is what the hub keeps of one tenant it follows; Hub.mu guards
// it.
type tenantFeed struct {
	// ready is closed once base and cursor are set (or err).
	ready chan struct{}
	err   error
	// ring holds the tenant's events after base up to cursor, while it has
	// watchers; without, base is cursor.
	ring   []registry.Event
	base   registry.Position
	cursor registry.Position
	// advanced is closed, and replaced, when cursor moves.
	advanced chan struct{}
	// watchers counts the Follow calls on the tenant; usedAt is when it was
	// last asked for (a version, a watch ending).
	watchers int
	usedAt   time.Time
	// pending: the tenant's events this process committed and the hub has
	// not read yet (version.go): event id, when Wrote was told.
	pending map[uuid.UUID]time.Time
}

// IdleTimeout is how long the hub follows a tenant that has no watcher
// after its version was last asked.
const IdleTimeout = 10 * time.Minute

// NewHub returns a Hub over opts.Source; Run makes it read.
func NewHub(opts Options) *Hub {
	h := &Hub{
		src: opts.Source, clock: opts.Clock, logger: opts.Logger, poll: opts.PollInterval,
		ringSize: opts.RingSize, bookmark: opts.BookmarkInterval, onPoll: opts.OnPoll,
		started: make(chan struct{}), reset: make(chan struct{}), added: make(chan struct{}, 1),
		tenants: make(map[uuid.UUID]*tenantFeed), horizons: make(map[int64]*horizonQueue),
	}
	h.router, _ = opts.Source.(store.TenantRouter)
	h.apart, _ = opts.Source.(store.HorizonsReader)
	h.node, _ = opts.Source.(store.NodeHorizonsReader)
	if h.clock == nil {
		h.clock = clockwork.NewRealClock()
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.poll <= 0 {
		h.poll = DefaultPollInterval
	}
	if h.ringSize <= 0 {
		h.ringSize = DefaultRingSize
	}
	if h.bookmark <= 0 {
		h.bookmark = DefaultBookmarkInterval
	}
	if h.onPoll == nil {
		h.onPoll = func(int, error) {}
	}
	return h
}

// horizonTimeout bounds one read of the horizons that callers share.
const horizonTimeout = 10 * time.Second

// horizonRead is one read of tenants' horizons, shared by every caller
// that asked for one before it started.
type horizonRead struct {
	done    chan struct{}
	tenants map[uuid.UUID]registry.Position
	// errs holds the error of each tenant the read could not answer for.
	errs map[uuid.UUID]error
	// stalled, for a node whose reads the hub bounds (nodeBound), is
	// closed by stall the store's stall time after the read's first
	// caller came: its callers then have ErrNodeStalled, and so has at
	// once a caller that joins it later. Nil otherwise.
	stalled chan struct{}
	stall   clockwork.Timer
}

// Horizon returns tenant's present position in the store: read after the
// call, in a read shared with the calls waiting at the same time (for any
// tenant of the same node), so that many watches starting at once (a
// fleet of watchers reconnecting) cost the store one read per round trip,
// not one each (on Citus, a read of a few tenants is a read of each:
// readHorizon).
func (h *Hub) Horizon(ctx context.Context, tenant uuid.UUID) (registry.Position, error) {
	node := h.horizonNode(ctx, tenant)
	bound := node >= 0 && h.nodeBound(ctx)
	h.hmu.Lock()
	q := h.horizons[node]
	if q == nil {
		q = &horizonQueue{}
		h.horizons[node] = q
		go h.readHorizons(node, q)
	}
	r := q.next
	if r == nil {
		r = &horizonRead{done: make(chan struct{}), tenants: make(map[uuid.UUID]registry.Position)}
		if bound {
			stalled := make(chan struct{})
			r.stalled, r.stall = stalled, h.clock.AfterFunc(h.node.NodeStall(), func() { close(stalled) })
		}
		q.next = r
	}
	r.tenants[tenant] = registry.Position{}
	h.hmu.Unlock()
	select {
	case <-r.done:
	case <-r.stalled:
		select {
		case <-r.done:
		default:
			return registry.Position{}, ErrNodeStalled
		}
	case <-ctx.Done():
		return registry.Position{}, ctx.Err()
	}
	if err := r.errs[tenant]; err != nil {
		return registry.Position{}, err
	}
	return r.tenants[tenant], nil
}

// nodeBound reports whether the hub bounds its callers' wait for a
// node's read itself, by the store's stall time, and reads the node's
// tenants in the reader's goroutine (store.NodeHorizonsReader.NodeHorizons):
// on a store that routes each tenant's reads to its node (Citus), as the
// store would bound it itself. The tenants of no known node (-1) share a
// queue, whose reads the store bounds.
func (h *Hub) nodeBound(ctx context.Context) bool {
	return h.node != nil && h.router != nil && h.router.TenantRouted(ctx)
}

// horizonNode returns the node whose queue of horizon reads tenant's
// callers join: the store's (store.TenantRouter.TenantNode), so that on
// Citus a worker that hangs holds up the reads of its own tenants alone;
// a store that does not route shares one queue among every tenant.
func (h *Hub) horizonNode(ctx context.Context, tenant uuid.UUID) int64 {
	if h.router == nil {
		return 0
	}
	return h.router.TenantNode(ctx, tenant)
}

// present asks ReadFeed for no event: after it, only its horizon.
var present = registry.Position{Seq: math.MaxInt64}

// readHorizons makes the reads of node's queue q that Horizon's callers
// wait for, one at a time: a caller that comes during a read waits for
// the next, which starts after its call. It ends, and drops q, when no
// caller waits.
func (h *Hub) readHorizons(node int64, q *horizonQueue) {
	for {
		h.hmu.Lock()
		r := q.next
		q.next = nil
		if r == nil {
			delete(h.horizons, node)
			h.hmu.Unlock()
			return
		}
		h.hmu.Unlock()
		tenants := make([]uuid.UUID, 0, len(r.tenants))
		for t := range r.tenants {
			tenants = append(tenants, t)
		}
		ctx, cancel := context.WithTimeout(context.Background(), horizonTimeout)
		r.errs = h.readHorizon(ctx, node, tenants, r.tenants, r.stalled != nil)
		cancel()
		close(r.done)
		if r.stall != nil {
			r.stall.Stop()
		}
	}
}

// readApartMax and readApartMaxRouted are the most tenants whose
// horizons readHorizon reads each apart, in one call of the store's
// (store.HorizonsReader), on a store that reads every tenant on one node
// and on one that routes each tenant's reads to a node of its own
// (store.TenantRouter: Citus); more go in one feed read. One caller at a
// time on the test clusters (BenchmarkHorizon of pkg/pgstore, busy CPU
// per call): on PostgreSQL 2 tenants apart 160-175 µs against 400-440
// µs in one feed read, 8 apart 235-285 µs against 330-345 µs, 32 apart
// 695-700 µs against 420-505 µs; on Citus, the tenants of one worker, 2
// apart 245-300 µs against 1,030 µs, 8 apart 490-550 µs against
// 1,390-1,570 µs, 32 apart 1,350-1,380 µs against 2,535-2,700 µs.
const (
	readApartMax       = 8
	readApartMaxRouted = 32
)

// readHorizon reads the horizons of tenants into positions and returns
// the error of each tenant it could not read: a tenant read has its
// horizon even when others failed (a Citus worker down). One tenant is
// read with the store's Horizon, the plainest statement; a few each
// apart in one call of the store's (Horizons: on Citus, each worker's
// tenants on it, so that a worker down fails its own tenants alone);
// more in one feed read that asks for no event, whose error is every
// unread tenant's. Bounded (the callers' wait bounded by nodeBound), one
// tenant or a few of node are read with the store's NodeHorizons, in this
// goroutine.
func (h *Hub) readHorizon(ctx context.Context, node int64, tenants []uuid.UUID, positions map[uuid.UUID]registry.Position, bounded bool) (errs map[uuid.UUID]error) {
	fail := func(tenant uuid.UUID, err error) {
		if errs == nil {
			errs = make(map[uuid.UUID]error)
		}
		errs[tenant] = err
	}
	apart := func(read func(context.Context, []uuid.UUID) ([]registry.Position, []error)) {
		got, failed := read(ctx, tenants)
		for i, tenant := range tenants {
			positions[tenant] = got[i]
			if failed[i] != nil {
				fail(tenant, failed[i])
			}
		}
	}
	switch {
	case bounded && len(tenants) <= h.apartLimit(ctx):
		apart(func(ctx context.Context, tenants []uuid.UUID) ([]registry.Position, []error) {
			return h.node.NodeHorizons(ctx, node, tenants)
		})
	case len(tenants) == 1:
		p, err := h.src.Horizon(ctx, tenants[0])
		if err != nil {
			fail(tenants[0], err)
		}
		positions[tenants[0]] = p
	case h.apart != nil && len(tenants) <= h.apartLimit(ctx):
		apart(h.apart.Horizons)
	default:
		after := make([]registry.Position, len(tenants))
		for i := range after {
			after[i] = present
		}
		batches, err := h.src.ReadFeed(ctx, tenants, after, 1)
		answered := make(map[uuid.UUID]bool, len(batches))
		for _, b := range batches {
			positions[b.Tenant] = b.Horizon
			answered[b.Tenant] = true
		}
		for _, t := range tenants {
			if err != nil && !answered[t] {
				fail(t, err)
			}
		}
	}
	return errs
}

// apartLimit returns the most tenants whose horizons readHorizon reads
// each apart.
func (h *Hub) apartLimit(ctx context.Context) int {
	if h.router != nil && h.router.TenantRouted(ctx) {
		return readApartMaxRouted
	}
	return readApartMax
}

// acquire starts following tenant, when the hub does not yet, from the
// position start returns, and returns its feed once that is known; watch
// counts a watcher, which release ends.
func (h *Hub) acquire(ctx context.Context, tenant uuid.UUID, watch bool, start func(context.Context) (registry.Position, error)) (*tenantFeed, error) {
	h.mu.Lock()
	tf := h.tenants[tenant]
	starter := tf == nil
	if starter {
		tf = &tenantFeed{ready: make(chan struct{}), advanced: make(chan struct{})}
		h.tenants[tenant] = tf
	}
	if watch {
		tf.watchers++
	}
	tf.usedAt = h.clock.Now()
	h.mu.Unlock()
	if starter {
		p, err := start(ctx)
		h.mu.Lock()
		if err != nil {
			tf.err = err
			if h.tenants[tenant] == tf {
				delete(h.tenants, tenant)
			}
		} else {
			if p.Epoch == 0 {
				p.Epoch = h.epoch
			}
			tf.base, tf.cursor = p, p
		}
		close(tf.ready)
		h.mu.Unlock()
		select {
		case h.added <- struct{}{}:
		default:
		}
	}
	select {
	case <-tf.ready:
	case <-ctx.Done():
		h.release(tf, watch)
		return nil, ctx.Err()
	}
	if tf.err != nil {
		h.release(tf, watch)
		return nil, tf.err
	}
	return tf, nil
}

// release ends what acquire counted.
func (h *Hub) release(tf *tenantFeed, watch bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if watch {
		tf.watchers--
	}
	tf.usedAt = h.clock.Now()
}

// Run reads the feed until ctx ends. Read errors are logged and retried
// at the poll interval.
func (h *Hub) Run(ctx context.Context) {
	close(h.started)
	failing := false
	for {
		changed := h.src.FeedChanged()
		tenants, after := h.followed()
		var (
			batches []store.FeedBatch
			err     error
			events  int
		)
		if len(tenants) > 0 {
			batches, err = h.src.ReadFeed(ctx, tenants, after, readLimit)
			for _, b := range batches {
				events += len(b.Events)
			}
			h.onPoll(events, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// Once per outage at warn level; the metric counts every one.
			level := slog.LevelDebug
			if !failing {
				level = slog.LevelWarn
			}
			failing = true
			h.logger.Log(ctx, level, "feed: read failed; retrying every poll", "err", err,
				"tenants_read", len(batches), "tenants", len(tenants))
			// The tenants read (on Citus, those of the workers that
			// answered) move on; the others are read again next poll.
			h.apply(batches)
		} else {
			if failing {
				h.logger.InfoContext(ctx, "feed: reading again")
				failing = false
			}
			if h.apply(batches) {
				continue // more to read now
			}
		}
		if h.wait(ctx, changed) != nil {
			return
		}
	}
}

// followed returns the tenants to read and the positions after which, and
// stops following those idle for IdleTimeout.
func (h *Hub) followed() ([]uuid.UUID, []registry.Position) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	var (
		tenants []uuid.UUID
		after   []registry.Position
	)
	for id, tf := range h.tenants {
		select {
		case <-tf.ready:
		default:
			continue // its start is being read
		}
		if tf.watchers == 0 && now.Sub(tf.usedAt) > IdleTimeout {
			delete(h.tenants, id)
			if h.observer != nil {
				h.observer.Forget(id)
			}
			continue
		}
		tenants = append(tenants, id)
		after = append(after, tf.cursor)
	}
	return tenants, after
}

// wait returns when the store says an event committed, a tenant is to be
// followed, the poll interval passed, or ctx ended (its error).
func (h *Hub) wait(ctx context.Context, changed <-chan struct{}) error {
	if changed != nil {
		// The store says when; the poll is a safety net.
		select {
		case <-changed:
			return nil
		case <-h.added:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-h.clock.After(10 * h.poll):
			return nil
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-h.added:
		return nil
	case <-h.clock.After(h.poll):
		return nil
	}
}

// apply adds a read to the tenants' rings and moves their cursors; more
// reports that a tenant's read was cut by its limit.
func (h *Hub) apply(batches []store.FeedBatch) (more bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range batches {
		if b.Horizon.Epoch != h.epoch && h.epoch != 0 {
			// Another history (a failover): what the rings hold may be gone.
			h.logger.Warn("feed: the store's history changed; watchers resume from their last position",
				"old_epoch", h.epoch, "new_epoch", b.Horizon.Epoch)
			h.epoch = b.Horizon.Epoch
			for _, tf := range h.tenants {
				tf.ring, tf.pending = nil, nil
			}
			if h.observer != nil {
				h.observer.Forget(uuid.Nil)
			}
			for _, b := range batches {
				if tf := h.tenants[b.Tenant]; tf != nil {
					tf.base, tf.cursor = b.Horizon, b.Horizon
				}
			}
			close(h.reset)
			h.reset = make(chan struct{})
			for _, tf := range h.tenants {
				h.signal(tf)
			}
			return false
		}
		h.epoch = b.Horizon.Epoch
	}
	for _, b := range batches {
		tf := h.tenants[b.Tenant]
		if tf == nil {
			continue // no longer followed
		}
		next := tf.cursor
		for _, ev := range b.Events {
			if ev.Position.Compare(next) <= 0 {
				continue
			}
			if tf.watchers > 0 {
				tf.ring = append(tf.ring, ev)
			}
			h.read(tf, &ev)
			next = ev.Position
		}
		if len(b.Events) < readLimit {
			next = next.Max(b.Horizon)
		} else {
			more = true
		}
		next.Epoch = b.Horizon.Epoch
		switch {
		case tf.watchers == 0:
			tf.ring, tf.base = nil, next
		case len(tf.ring) > h.ringSize:
			// Drop the oldest quarter at once, so that trimming is rare.
			drop := max(len(tf.ring)-h.ringSize, h.ringSize/4)
			tf.base = tf.ring[drop-1].Position
			tf.ring = append(tf.ring[:0:0], tf.ring[drop:]...)
		}
		if next.Compare(tf.cursor) > 0 || next.Epoch != tf.cursor.Epoch {
			tf.cursor = next
			h.signal(tf)
		}
	}
	return more
}

// signal wakes tf's watchers; h.mu is held.
func (h *Hub) signal(tf *tenantFeed) {
	close(tf.advanced)
	tf.advanced = make(chan struct{})
}

// Watcher receives what a watch sends: events in commit order, each with
// its position, and bookmarks, positions at least as recent as every event
// sent before them.
type Watcher interface {
	Events(events []registry.Event) error
	Bookmark(pos registry.Position) error
}

// Follow sends tenant's events after from that f selects (its Limit and
// After are ignored) to w, until ctx ends (nil), the watcher fails (its
// error), or the history changed (ErrReset).
func (h *Hub) Follow(ctx context.Context, tenant uuid.UUID, f registry.EventFilter, from registry.Position, w Watcher) error {
	select {
	case <-h.started:
	case <-ctx.Done():
		return nil
	}
	tf, err := h.acquire(ctx, tenant, true, func(ctx context.Context) (registry.Position, error) {
		return h.Horizon(ctx, tenant)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer h.release(tf, true)
	h.mu.RLock()
	reset := h.reset
	h.mu.RUnlock()
	pos := from
	timer := h.clock.NewTimer(h.bookmark)
	defer timer.Stop()
	for {
		h.mu.RLock()
		behind := pos.Compare(tf.base) < 0 || pos.Epoch != tf.cursor.Epoch && pos != (registry.Position{})
		var (
			events   []registry.Event
			cursor   = tf.cursor
			advanced = tf.advanced
		)
		if !behind {
			events = matching(tf.ring, f, pos)
		}
		h.mu.RUnlock()

		if behind {
			// Catch up from the store, one page at a time.
			f.After, f.Limit = pos, readLimit
			page, err := h.src.Events(ctx, tenant, f)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if len(page.Events) > 0 {
				if err := w.Events(page.Events); err != nil {
					return err
				}
				timer.Reset(h.bookmark)
			}
			if page.Horizon.Compare(pos) <= 0 && page.Next == nil {
				// Nothing settled yet past pos: wait for the hub.
				pos.Epoch = cursor.Epoch
				if err := h.idle(ctx, advanced, reset, timer, pos, w); err != nil {
					return stopped(err)
				}
				continue
			}
			pos = page.Horizon
			continue
		}
		if len(events) > 0 {
			if err := w.Events(events); err != nil {
				return err
			}
			timer.Reset(h.bookmark)
		}
		pos = cursor.Max(pos)
		if err := h.idle(ctx, advanced, reset, timer, pos, w); err != nil {
			return stopped(err)
		}
	}
}

// idle waits for the hub to advance, sending a bookmark at pos when the
// watch was silent for the bookmark interval.
func (h *Hub) idle(ctx context.Context, advanced, reset <-chan struct{}, timer clockwork.Timer, pos registry.Position, w Watcher) error {
	for {
		select {
		case <-advanced:
			return nil
		case <-reset:
			return ErrReset
		case <-ctx.Done():
			return errStop
		case <-timer.Chan():
			// The next interval starts when this one ends, not when the
			// watcher has taken the bookmark.
			timer.Reset(h.bookmark)
			if err := w.Bookmark(pos); err != nil {
				return err
			}
		}
	}
}

// errStop ends Follow without an error when its context ends.
var errStop = errors.New("watch stopped")

func stopped(err error) error {
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// matching returns the events of ring after pos that f selects; h.mu is
// held.
func matching(ring []registry.Event, f registry.EventFilter, pos registry.Position) []registry.Event {
	i := sort.Search(len(ring), func(i int) bool { return ring[i].Position.Compare(pos) > 0 })
	var out []registry.Event
	for j := i; j < len(ring); j++ {
		if ev := &ring[j]; f.Matches(ev) {
			out = append(out, *ev)
		}
	}
	return out
}
