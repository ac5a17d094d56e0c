package feed

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Source is the store's side of the feed: every tenant's trail as it
// commits, and one tenant's trail to catch a watch up.
type Source interface {
	registry.FeedReader
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

// Hub reads the feed once for every watcher of the process.
type Hub struct {
	src      Source
	clock    clockwork.Clock
	logger   *slog.Logger
	poll     time.Duration
	ringSize int
	bookmark time.Duration
	onPoll   func(int, error)

	mu sync.RWMutex
	// ring holds the events after base up to cursor, in commit order.
	ring   []registry.Event
	base   registry.Position
	cursor registry.Position
	// started is closed once base and cursor are set.
	started chan struct{}
	// advanced is closed, and replaced, when cursor moves.
	advanced chan struct{}
	// reset is closed, and replaced, when the history changed.
	reset chan struct{}
	// marks is, per tenant, what the hub knows of its changes (version.go).
	marks map[uuid.UUID]*tenantMark
	// recent holds the ids of the events read last, so that Wrote can
	// tell an event the hub has read already.
	recent recentIDs

	// hmu guards the shared horizon reads: nextHorizon is the read that
	// callers now wait for, not yet started; readingHorizon says whether
	// readHorizons runs.
	hmu            sync.Mutex
	nextHorizon    *horizonRead
	readingHorizon bool
}

// NewHub returns a Hub over opts.Source; Run makes it read.
func NewHub(opts Options) *Hub {
	h := &Hub{
		src: opts.Source, clock: opts.Clock, logger: opts.Logger, poll: opts.PollInterval,
		ringSize: opts.RingSize, bookmark: opts.BookmarkInterval, onPoll: opts.OnPoll,
		started: make(chan struct{}), advanced: make(chan struct{}), reset: make(chan struct{}),
		marks: make(map[uuid.UUID]*tenantMark),
	}
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

// horizonTimeout bounds one read of the horizon that callers share.
const horizonTimeout = 10 * time.Second

// horizonRead is one read of the store's horizon, shared by every caller
// that asked for it before it started.
type horizonRead struct {
	done chan struct{}
	pos  registry.Position
	err  error
}

// Horizon returns the present position of the store: read after the call,
// in a read shared with the calls waiting at the same time, so that many
// watches starting at once (a fleet of watchers reconnecting) cost the
// store one read per round trip, not one each.
func (h *Hub) Horizon(ctx context.Context) (registry.Position, error) {
	h.hmu.Lock()
	r := h.nextHorizon
	if r == nil {
		r = &horizonRead{done: make(chan struct{})}
		h.nextHorizon = r
		if !h.readingHorizon {
			h.readingHorizon = true
			go h.readHorizons()
		}
	}
	h.hmu.Unlock()
	select {
	case <-r.done:
		return r.pos, r.err
	case <-ctx.Done():
		return registry.Position{}, ctx.Err()
	}
}

// readHorizons makes the reads that Horizon's callers wait for, one at a
// time: a caller that comes during a read waits for the next, which starts
// after its call.
func (h *Hub) readHorizons() {
	for {
		h.hmu.Lock()
		r := h.nextHorizon
		h.nextHorizon = nil
		if r == nil {
			h.readingHorizon = false
			h.hmu.Unlock()
			return
		}
		h.hmu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), horizonTimeout)
		r.pos, r.err = h.src.Horizon(ctx)
		cancel()
		close(r.done)
	}
}

// Run reads the feed until ctx ends. Read errors are logged and retried
// at the poll interval.
func (h *Hub) Run(ctx context.Context) {
	var start registry.Position
	for {
		p, err := h.src.Horizon(ctx)
		if err == nil {
			start = p
			break
		}
		if ctx.Err() != nil {
			return
		}
		h.logger.WarnContext(ctx, "feed: read the horizon", "err", err)
		if h.wait(ctx, nil) != nil {
			return
		}
	}
	h.mu.Lock()
	h.base, h.cursor = start, start
	// What this process wrote before now committed before the horizon just
	// read, and the hub reads only after it: counted as pending, such a
	// write would set this replica's versions apart until PendingTTL. (A
	// write that commits before that horizon and is told after this point
	// still counts until PendingTTL: the hub cannot tell it from a write
	// that it will read.)
	for _, m := range h.marks {
		m.pending = nil
	}
	close(h.started)
	h.mu.Unlock()

	failing := false
	for {
		changed := h.src.FeedChanged()
		h.mu.RLock()
		after := h.cursor
		h.mu.RUnlock()
		batch, err := h.src.ReadFeed(ctx, after, readLimit)
		h.onPoll(len(batch.Events), err)
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
			h.logger.Log(ctx, level, "feed: read failed; retrying every poll", "err", err)
		} else {
			if failing {
				h.logger.InfoContext(ctx, "feed: reading again")
				failing = false
			}
			h.apply(batch)
			if len(batch.Events) == readLimit {
				continue // more to read now
			}
		}
		if h.wait(ctx, changed) != nil {
			return
		}
	}
}

// wait returns when the store says an event committed, the poll interval
// passed, or ctx ended (its error).
func (h *Hub) wait(ctx context.Context, changed <-chan struct{}) error {
	if changed != nil {
		// The store says when; the poll is a safety net.
		select {
		case <-changed:
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
	case <-h.clock.After(h.poll):
		return nil
	}
}

// apply adds a read to the ring and moves the cursor.
func (h *Hub) apply(b registry.FeedBatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b.Horizon.Epoch != h.cursor.Epoch && h.cursor.Epoch != 0 {
		// Another history (a failover): what the ring holds may be gone.
		h.logger.Warn("feed: the store's history changed; watchers resume from their last position",
			"old_epoch", h.cursor.Epoch, "new_epoch", b.Horizon.Epoch)
		h.ring = nil
		h.base, h.cursor = b.Horizon, b.Horizon
		h.marks = make(map[uuid.UUID]*tenantMark)
		close(h.reset)
		h.reset = make(chan struct{})
		h.signal()
		return
	}
	next := h.cursor
	for _, ev := range b.Events {
		if ev.Position.Compare(next) <= 0 {
			continue
		}
		h.ring = append(h.ring, ev)
		h.read(&ev)
		next = ev.Position
	}
	if len(b.Events) < readLimit {
		next = next.Max(b.Horizon)
	}
	if over := len(h.ring) - h.ringSize; over > 0 {
		// Drop the oldest quarter at once, so that trimming is rare.
		drop := max(over, h.ringSize/4)
		h.base = h.ring[drop-1].Position
		h.ring = append(h.ring[:0:0], h.ring[drop:]...)
	}
	if next.Compare(h.cursor) > 0 || next.Epoch != h.cursor.Epoch {
		h.cursor = next
		h.signal()
	}
}

// signal wakes every watcher; h.mu is held.
func (h *Hub) signal() {
	close(h.advanced)
	h.advanced = make(chan struct{})
}

// Sink receives what a watch sends: events in commit order, each with its
// position, and bookmarks, positions at least as recent as every event
// sent before them.
type Sink interface {
	Events(events []registry.Event) error
	Bookmark(pos registry.Position) error
}

// Follow sends tenant's events after from that f selects (its Limit and
// After are ignored) to sink, until ctx ends (nil), the sink fails (its
// error), or the history changed (ErrReset).
func (h *Hub) Follow(ctx context.Context, tenant uuid.UUID, f registry.EventFilter, from registry.Position, sink Sink) error {
	select {
	case <-h.started:
	case <-ctx.Done():
		return nil
	}
	h.mu.RLock()
	reset := h.reset
	h.mu.RUnlock()
	pos := from
	timer := h.clock.NewTimer(h.bookmark)
	defer timer.Stop()
	for {
		h.mu.RLock()
		behind := pos.Compare(h.base) < 0 || pos.Epoch != h.cursor.Epoch && pos != (registry.Position{})
		var (
			events   []registry.Event
			cursor   = h.cursor
			advanced = h.advanced
		)
		if !behind {
			events = h.matching(tenant, f, pos)
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
				if err := sink.Events(page.Events); err != nil {
					return err
				}
				timer.Reset(h.bookmark)
			}
			if page.Horizon.Compare(pos) <= 0 && page.Next == nil {
				// Nothing settled yet past pos: wait for the hub.
				pos.Epoch = cursor.Epoch
				if err := h.idle(ctx, advanced, reset, timer, pos, sink); err != nil {
					return stopped(err)
				}
				continue
			}
			pos = page.Horizon
			continue
		}
		if len(events) > 0 {
			if err := sink.Events(events); err != nil {
				return err
			}
			timer.Reset(h.bookmark)
		}
		pos = cursor.Max(pos)
		if err := h.idle(ctx, advanced, reset, timer, pos, sink); err != nil {
			return stopped(err)
		}
	}
}

// idle waits for the hub to advance, sending a bookmark at pos when the
// watch was silent for the bookmark interval.
func (h *Hub) idle(ctx context.Context, advanced, reset <-chan struct{}, timer clockwork.Timer, pos registry.Position, sink Sink) error {
	for {
		select {
		case <-advanced:
			return nil
		case <-reset:
			return ErrReset
		case <-ctx.Done():
			return errStop
		case <-timer.Chan():
			if err := sink.Bookmark(pos); err != nil {
				return err
			}
			timer.Reset(h.bookmark)
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

// matching returns tenant's events of the ring after pos that f selects;
// h.mu is held.
func (h *Hub) matching(tenant uuid.UUID, f registry.EventFilter, pos registry.Position) []registry.Event {
	i := sort.Search(len(h.ring), func(i int) bool { return h.ring[i].Position.Compare(pos) > 0 })
	var out []registry.Event
	for j := i; j < len(h.ring); j++ {
		ev := &h.ring[j]
		if ev.TenantID == tenant && f.Matches(ev) {
			out = append(out, *ev)
		}
	}
	return out
}
