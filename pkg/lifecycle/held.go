package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/internal/logsample"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Heartbeats held in memory (contract: "Heartbeats are held in memory;
// transitions are durable"). A heartbeat of a server that this replica
// knows to be healthy is answered once it is held; the held heartbeats
// are written every flush interval, each window's latest per server, in
// one store call per flush (store.HeldBatchWriter). Every other
// heartbeat (a server not known here, a recovery) goes to the store and is
// answered after it commits, as is every transition.
//
// What this replica knows of a server comes from the store's answers to
// its own heartbeats and is forgotten on every event of the server that
// the change feed reads (any replica's transition, registration or
// deregistration): a heartbeat is held only while the feed follows the
// server's tenant from a position read before the store answered it, and
// no event of the tenant was read in between, so an answer from memory is
// never older than the feed. A flush that finds a server no longer
// healthy (a sweep raced) recovers it with its audit event; one that finds
// it deregistered forgets it.
//
// A flush that fails keeps its heartbeats for the next one (up to
// MaxHeld) and turns holding off until a write succeeds: meanwhile every
// heartbeat goes to the store, so that a replica that cannot write answers
// 503 and never acknowledges a heartbeat after it failed to write one. A
// write fails for one tenant (a Citus worker that is down) or for all (the
// database): holding stops for the tenants whose write failed, and for
// every tenant when no write of a flush succeeded; a write of the tenant
// (any write, when every tenant stopped) turns it on again.

// HeldFeed is the change feed as the holder uses it (feed.Hub).
type HeldFeed interface {
	// Current reports whether the feed has read every event of tenant that
	// committed before the call (a read of the tenant's present position,
	// shared by the calls waiting at the same time): then what the
	// Registrar was told of the tenant's servers is up to date.
	Current(ctx context.Context, tenant uuid.UUID) (bool, error)
	// Keep makes the feed follow tenant and reports whether it followed
	// it already: then every event of the tenant that commits from now on
	// reaches the Registrar's Read.
	Keep(tenant uuid.UUID) bool
}

// Defaults of the held heartbeats.
const (
	// DefaultMaxHeld bounds the heartbeats held and not yet written; past
	// it, heartbeats go to the store one by one.
	DefaultMaxHeld = 100_000
	// finalFlushTimeout bounds the flush when the Registrar stops.
	finalFlushTimeout = 5 * time.Second
	// flushTimeout bounds any flush: past it its heartbeats are kept for
	// the next one (a flush held up past a window already sends every
	// heartbeat to the store: holder.stuck).
	flushTimeout = 5 * time.Second
)

// SweepGrace is the allowance the monitor adds to 2I and 3I for heartbeats
// held for flush: one window for the heartbeat to wait, two for its write
// to commit on a loaded machine (with one for the write, a 2-core CI run
// of TestHeldReplicaKilledMidWindow once saw a write late by 40 ms and a
// false degraded). The written time is the database's now less the
// heartbeat's age on the replica's monotonic clock, so the replicas' wall
// clocks never meet the database's and add no skew.
func SweepGrace(flush time.Duration) time.Duration { return 3 * flush }

// FlushStats describes one flush, for metrics.
type FlushStats struct {
	// Heartbeats written, and the store calls (one per tenant) that wrote
	// them; Failed calls, whose heartbeats are kept for the next flush.
	Heartbeats, Calls, Failed int
	// Lag is the age of the oldest heartbeat written when its call
	// returned: how long a heartbeat waited to be durable.
	Lag time.Duration
	// Dropped counts heartbeats a failed flush could not keep (MaxHeld).
	Dropped int
}

// Messages of failed flushes: for every tenant, and for some.
const (
	logFailedFlush  = "held heartbeats: write failed; heartbeats go to the store until one succeeds"
	logPartialFlush = "held heartbeats: write failed for some tenants; theirs go to the store until one succeeds"
)

// holder holds heartbeats of healthy servers until they are written.
type holder struct {
	writer   store.HeldBatchWriter
	feed     HeldFeed
	clock    clockwork.Clock
	interval time.Duration
	max      int
	onFlush  func(FlushStats)
	logger   *slog.Logger
	// flushLogs thins out the warnings of failed flushes, which a
	// stopped database or Citus worker repeats on every flush.
	flushLogs *logsample.Sampler
	sink      TransitionSink

	// failing is set by a flush whose every write failed and cleared by
	// any write that succeeds: while set, nothing is held.
	failing atomic.Bool
	// flushSlot makes flushes one at a time (a flush holds its one
	// place), and a flush that waits for it gives up when its context
	// ends; flushingSince is when the flush under way began (UnixNano of
	// the clock; 0: none).
	flushSlot     chan struct{}
	flushingSince atomic.Int64

	mu      sync.Mutex
	tenants map[uuid.UUID]*heldTenant
	// held counts the heartbeats in every tenant's beats.
	held int
}

// heldTenant is what the holder keeps of one tenant; holder.mu guards it.
type heldTenant struct {
	// gen moves with every event of the tenant the feed reads.
	gen uint64
	// known are the tenant's servers known to be healthy.
	known map[uuid.UUID]registry.Server
	// beats are the heartbeats held and not yet written: when each was
	// received; writing are those of the flush under way.
	beats, writing map[uuid.UUID]time.Time
	// failing: the tenant's last write failed; nothing of it is held
	// until one succeeds.
	failing bool
}

// stamp is what the holder knew of a tenant before asking the store: a
// server learnt from the store's answer is kept only if nothing of its
// tenant was read in between.
type stamp struct {
	following bool
	gen       uint64
}

func (h *holder) tenant(id uuid.UUID) *heldTenant {
	t := h.tenants[id]
	if t == nil {
		t = &heldTenant{}
		h.tenants[id] = t
	}
	return t
}

// hold holds a heartbeat of tenant's server received at now and returns
// the server as the answer, or reports that it must go to the store. It
// holds only what the feed has confirmed: a server known healthy, and no
// event of its tenant committed before the heartbeat that the feed has
// not read (another replica's deregistration or sweep), so that such a
// heartbeat is answered by the store, 409 or a committed recovery, as it
// would be without holding.
func (h *holder) hold(ctx context.Context, tenant, serverID uuid.UUID, now time.Time) (registry.Server, bool) {
	if h.failing.Load() || h.stuck(now) || !h.feed.Keep(tenant) || !h.knows(tenant, serverID) {
		return registry.Server{}, false
	}
	if current, err := h.feed.Current(ctx, tenant); err != nil || !current {
		return registry.Server{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tenants[tenant]
	if t == nil || t.failing {
		return registry.Server{}, false
	}
	srv, ok := t.known[serverID]
	if !ok {
		return registry.Server{}, false
	}
	if _, again := t.beats[serverID]; !again {
		if h.held >= h.max {
			return registry.Server{}, false
		}
		if t.beats == nil {
			t.beats = make(map[uuid.UUID]time.Time)
		}
		h.held++
	}
	t.beats[serverID] = now
	srv.LastHeartbeatAt = now
	return srv, true
}

// stuck reports whether the flush under way has taken longer than a
// window: a write held up (a database that stalls, a lock) that a
// heartbeat held now could wait behind past the sweep's grace. Until it
// ends, every heartbeat goes to the store.
func (h *holder) stuck(now time.Time) bool {
	since := h.flushingSince.Load()
	return since != 0 && now.Sub(time.Unix(0, since)) > h.interval
}

// knows reports whether tenant's server is known healthy and its
// heartbeats may be held.
func (h *holder) knows(tenant, serverID uuid.UUID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tenants[tenant]
	if t == nil || t.failing {
		return false
	}
	_, ok := t.known[serverID]
	return ok
}

// before returns what the holder knows of tenant before the store is
// asked about one of its servers.
func (h *holder) before(tenant uuid.UUID) stamp {
	following := h.feed.Keep(tenant)
	h.mu.Lock()
	defer h.mu.Unlock()
	return stamp{following: following, gen: h.tenant(tenant).gen}
}

// learn keeps srv, as the store answered after st, as known when nothing
// of its tenant was read since st.
func (h *holder) learn(st stamp, srv registry.Server) {
	h.failing.Store(false)
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tenant(srv.TenantID)
	t.failing = false
	if !st.following || srv.Status != registry.StatusHealthy || t.gen != st.gen {
		return
	}
	if t.known == nil {
		t.known = make(map[uuid.UUID]registry.Server)
	}
	srv.HeartbeatIntervalSecs = 0
	t.known[srv.ServerID] = srv
}

// failed says that a write of tenant's heartbeats failed: nothing of it is
// held until one succeeds.
func (h *holder) failed(tenant uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tenant(tenant).failing = true
}

// forget drops what the holder knows of tenant's server, and its held
// heartbeat when drop is set (the server is deregistered).
func (h *holder) forget(tenant, serverID uuid.UUID, drop bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tenants[tenant]
	if t == nil {
		return
	}
	t.gen++
	delete(t.known, serverID)
	if _, ok := t.beats[serverID]; ok && drop {
		delete(t.beats, serverID)
		h.held--
	}
}

// latest returns the latest heartbeat held (or being written) of tenant's
// server, if any.
func (h *holder) latest(tenant, serverID uuid.UUID) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tenants[tenant]
	if t == nil {
		return time.Time{}, false
	}
	at, ok := t.beats[serverID]
	if w, inflight := t.writing[serverID]; inflight && (!ok || w.After(at)) {
		at, ok = w, true
	}
	return at, ok
}

// read is an event the feed read: its server is no longer known.
func (h *holder) read(ev registry.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tenant(ev.TenantID)
	t.gen++
	delete(t.known, ev.ServerID)
}

// unwritten returns the tenants whose last write failed and that have a
// heartbeat it kept, held or being written, received within the last
// within: an older one would not keep its server from being marked.
func (h *holder) unwritten(within time.Duration) []uuid.UUID {
	now := h.clock.Now()
	recent := func(beats map[uuid.UUID]time.Time) bool {
		for _, at := range beats {
			if now.Sub(at) < within {
				return true
			}
		}
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []uuid.UUID
	for id, t := range h.tenants {
		if t.failing && (recent(t.beats) || recent(t.writing)) {
			out = append(out, id)
		}
	}
	return out
}

// forgetTenant forgets every server of tenant (uuid.Nil: of every
// tenant); held heartbeats stay, to be written.
func (h *holder) forgetTenant(tenant uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if tenant == uuid.Nil {
		for _, t := range h.tenants {
			t.gen++
			t.known = nil
		}
		return
	}
	if t := h.tenants[tenant]; t != nil {
		t.gen++
		t.known = nil
	}
}

// tenantBeats is one tenant's share of a flush.
type tenantBeats struct {
	tenant uuid.UUID
	beats  map[uuid.UUID]time.Time
}

// flush writes every heartbeat held, each tenant's share in a statement of
// its own (writeAll). A share that fails keeps its tenant's heartbeats for
// the next flush and turns holding off for its tenant; the first error is
// returned when no share was written.
func (h *holder) flush(ctx context.Context) error {
	select {
	case h.flushSlot <- struct{}{}:
	case <-ctx.Done():
		// The flush under way writes what was held when it began; what
		// came since waits for the next.
		return fmt.Errorf("held heartbeats: waiting for the flush under way: %w", ctx.Err())
	}
	defer func() { <-h.flushSlot }()
	h.flushingSince.Store(h.clock.Now().UnixNano())
	defer h.flushingSince.Store(0)
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	h.mu.Lock()
	var work []tenantBeats
	for id, t := range h.tenants {
		if len(t.beats) == 0 {
			continue
		}
		work = append(work, tenantBeats{id, t.beats})
		t.writing, t.beats = t.beats, nil
	}
	h.held = 0
	h.mu.Unlock()
	if len(work) == 0 {
		return nil
	}

	var (
		firstErr error
		stats    FlushStats
	)
	for i, err := range h.writeAll(ctx, work) {
		w := work[i]
		stats.Calls++
		if err != nil {
			stats.Failed++
			stats.Dropped += h.keep(w)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		h.mu.Lock()
		h.tenant(w.tenant).failing = false
		h.mu.Unlock()
		stats.Heartbeats += len(w.beats)
		now := h.clock.Now()
		for _, at := range w.beats {
			stats.Lag = max(stats.Lag, now.Sub(at))
		}
	}
	h.mu.Lock()
	for _, w := range work {
		if t := h.tenants[w.tenant]; t != nil {
			t.writing = nil
		}
	}
	h.mu.Unlock()
	switch {
	case stats.Failed == stats.Calls:
		h.failing.Store(true)
		h.flushLogs.Warn(ctx, h.logger, logFailedFlush, "err", firstErr)
	case stats.Failed > 0:
		h.failing.Store(false)
		h.flushLogs.Warn(ctx, h.logger, logPartialFlush, "tenants", stats.Failed, "err", firstErr)
	default:
		h.failing.Store(false)
	}
	if h.onFlush != nil {
		h.onFlush(stats)
	}
	if stats.Failed < stats.Calls {
		return nil
	}
	return firstErr
}

// writeAll writes every tenant's share of a flush in one call of the
// store (on plain PostgreSQL one round trip and one commit) and returns
// the error of each share, in order.
func (h *holder) writeAll(ctx context.Context, work []tenantBeats) []error {
	now := h.clock.Now()
	batch := make([]store.TenantHeld, len(work))
	for i, w := range work {
		beats := make([]store.HeldHeartbeat, 0, len(w.beats))
		for id, at := range w.beats {
			beats = append(beats, store.HeldHeartbeat{ServerID: id, Age: now.Sub(at)})
		}
		batch[i] = store.TenantHeld{Tenant: w.tenant, Beats: beats}
	}
	errs := make([]error, len(work))
	for i, res := range h.writer.WriteHeldBatch(ctx, batch) {
		if errs[i] = res.Err; res.Err == nil {
			h.found(ctx, work[i].tenant, work[i].beats, res.Outcomes)
		}
	}
	return errs
}

// oneByOne writes a batch one tenant at a time: the batch of a store that
// writes one tenant per call (the memory store, where a call costs no
// round trip).
type oneByOne struct{ store.HeldHeartbeatWriter }

func (w oneByOne) WriteHeldBatch(ctx context.Context, batch []store.TenantHeld) []store.TenantHeldResult {
	out := make([]store.TenantHeldResult, len(batch))
	for i, share := range batch {
		out[i].Outcomes, out[i].Err = w.WriteHeldHeartbeats(ctx, share.Tenant, share.Beats)
	}
	return out
}

// found acts on what a write of tenant's heartbeats beats found.
func (h *holder) found(ctx context.Context, tenant uuid.UUID, beats map[uuid.UUID]time.Time, outs []store.HeldOutcome) {
	for _, o := range outs {
		switch {
		case errors.Is(o.Err, store.ErrBusy):
			// Its row was held by another transaction: the next flush
			// writes it.
			h.requeue(tenantBeats{tenant, map[uuid.UUID]time.Time{o.ServerID: beats[o.ServerID]}})
		case o.Err != nil:
			// Deregistered or gone since it was learnt: the next heartbeat
			// goes to the store, which answers it.
			h.forget(tenant, o.ServerID, false)
		case o.Event != nil:
			h.logger.InfoContext(ctx, "heartbeat changed status", "tenant_id", tenant.String(),
				"server_id", o.ServerID.String(), "module_name", o.Server.ModuleName,
				"from_status", fromStatus(o.Event), "status", string(o.Server.Status), "trace_id", o.Server.TraceID,
				"held", true)
			h.sink.Transition(ctx, *o.Event)
		}
	}
}

// keep puts back the heartbeats of a failed write, up to max, and stops
// holding the tenant's; it returns how many it dropped. The caller holds
// no lock.
func (h *holder) keep(w tenantBeats) (dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tenant(w.tenant).failing = true
	return h.requeueLocked(w)
}

// requeue puts back heartbeats for the next flush, up to max; it returns
// how many it dropped.
func (h *holder) requeue(w tenantBeats) (dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requeueLocked(w)
}

func (h *holder) requeueLocked(w tenantBeats) (dropped int) {
	t := h.tenant(w.tenant)
	if t.beats == nil {
		t.beats = make(map[uuid.UUID]time.Time, len(w.beats))
	}
	for id, at := range w.beats {
		if later, ok := t.beats[id]; ok {
			if at.After(later) {
				t.beats[id] = at
			}
			continue
		}
		if h.held >= h.max {
			dropped++
			continue
		}
		t.beats[id] = at
		h.held++
	}
	return dropped
}

// run flushes every interval until ctx ends, then once more.
func (h *holder) run(ctx context.Context) error {
	ticker := h.clock.NewTicker(h.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
			defer cancel()
			if err := h.flush(fctx); err != nil {
				return errors.Join(errors.New("held heartbeats: last flush failed"), err)
			}
			return nil
		case <-ticker.Chan():
			_ = h.flush(ctx) // logged and counted by flush
		}
	}
}

func fromStatus(ev *registry.Event) string {
	if ev.FromStatus == nil {
		return ""
	}
	return string(*ev.FromStatus)
}
