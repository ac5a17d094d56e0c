package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/internal/logsample"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// DefaultSweepBatch bounds the transitions one sweep statement applies; a
// sweep repeats until a batch comes back short, at most maxSweepBatches
// times, and the next tick goes on from there.
const DefaultSweepBatch = 1000

const maxSweepBatches = 100

// MinSweepTimeout is the least time a sweep of the loop gets by default,
// whatever the heartbeat interval (a sweep's time is one interval): a
// sweep cut short loses its connections, and the next pays for new ones
// (on Citus a backend that loads the cluster's metadata, and its
// connections to the workers), so that below this time a loaded machine
// can fail every sweep of a short interval (measured: at
// --heartbeat-interval 200ms on Citus beside four busy loops, 143 sweeps
// in a row for 44 s).
const MinSweepTimeout = time.Second

// Warnings of a sweep that an outage of a Citus worker repeats.
const (
	logPartialSweep     = "sweep failed for some tenants"
	logFlushBeforeSweep = "sweep: writing held heartbeats first failed"
)

// Monitor is the health monitor: every period it sweeps all tenants and
// moves servers that stopped heartbeating to degraded and unhealthy.
type Monitor struct {
	store  store.Monitor
	sink   TransitionSink
	logger *slog.Logger
	// logs thins out the warnings that an outage of a Citus worker
	// repeats on every sweep.
	logs     *logsample.Sampler
	clock    clockwork.Clock
	interval time.Duration
	period   time.Duration
	batch    int
	observe  func(d time.Duration, transitions []registry.Event, err error)
	trace    func(ctx context.Context) (context.Context, func(transitions []registry.Event, err error))

	blindAfter    time.Duration
	onBlind       func(store.BlindWindow)
	massLossShare float64
	massLossMin   int
	onMassLoss    func(MassLoss)
	sweepTimeout  time.Duration
	grace         time.Duration
	beforeSweep   func(ctx context.Context) error
	unwritten     func(within time.Duration) []uuid.UUID

	mu       sync.Mutex
	stop     chan struct{} // closed by Stop
	done     chan struct{} // closed when the loop has returned
	cancel   context.CancelFunc
	sweepErr error // the last sweep's error, for Healthy
	failed   int   // sweeps failed in a row, for Healthy
}

// unhealthyAfter is how many sweeps in a row must fail for Healthy to
// report it: one sweep that runs out of its time on a loaded machine is
// not a monitor that fails, and a replica is not taken out of service for
// it.
const unhealthyAfter = 2

// MonitorOptions configures a Monitor.
type MonitorOptions struct {
	Store             store.Monitor
	Sink              TransitionSink
	Logger            *slog.Logger
	Clock             clockwork.Clock // nil: the real clock
	HeartbeatInterval time.Duration
	Period            time.Duration
	Batch             int
	// Observe, when set, is called after every sweep (for metrics).
	Observe func(d time.Duration, transitions []registry.Event, err error)
	// Trace, when set, is called as each sweep starts: the sweep runs in
	// the context it returns (a span's, for tracing), and end is called
	// with the sweep's transitions and error when it is over.
	Trace func(ctx context.Context) (sweepCtx context.Context, end func(transitions []registry.Event, err error))

	// BlindAfter turns on blind-window protection (SweepRequest): a gap
	// longer than this between successful sweeps means the registry was
	// blind. Zero: DefaultBlindAfter; negative: off.
	BlindAfter time.Duration
	// OnBlind is called once per blind window, when sight returns.
	OnBlind func(store.BlindWindow)
	// MassLossShare and MassLossMin set the mass-heartbeat-loss check: more
	// than this share of a tenant's live servers, and at least this many,
	// going unhealthy in one sweep (defaults 0.5 and 10). The transitions
	// are still applied.
	MassLossShare float64
	MassLossMin   int
	// OnMassLoss is called for each tenant with a mass heartbeat loss.
	OnMassLoss func(MassLoss)
	// SweepTimeout bounds each sweep of the loop (Start, Run); zero: the
	// heartbeat interval, and at least MinSweepTimeout.
	SweepTimeout time.Duration
	// Grace is added to 2I and 3I (SweepRequest.Grace): SweepGrace of the
	// held heartbeats' flush window, when heartbeats are held.
	Grace time.Duration
	// BeforeSweep, when set, runs before each sweep (Registrar.Flush, so
	// that this replica's held heartbeats are written), within half of the
	// time the sweep has left; its error is logged and the sweep runs.
	BeforeSweep func(ctx context.Context) error
	// Unwritten, when set, returns after BeforeSweep the tenants of which
	// this replica holds heartbeats it answered and could not write, one
	// of them received within the last within (Registrar.Unwritten): the
	// sweep skips them (SweepRequest.Skip). Another replica's are not
	// known here.
	Unwritten func(within time.Duration) []uuid.UUID
}

// DefaultBlindAfter is the gap between successful sweeps that counts as a
// blind registry: two monitor periods, and at least one heartbeat interval.
func DefaultBlindAfter(period, interval time.Duration) time.Duration {
	return max(2*period, interval)
}

// NewMonitor returns a Monitor with opts, defaults filled in.
func NewMonitor(opts MonitorOptions) *Monitor {
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	interval := cmp.Or(max(opts.HeartbeatInterval, 0), registry.DefaultHeartbeatInterval)
	m := &Monitor{store: opts.Store, logger: logger, observe: opts.Observe,
		sink:         cmp.Or[TransitionSink](opts.Sink, LogSink{Logger: logger}),
		clock:        cmp.Or[clockwork.Clock](opts.Clock, clockwork.NewRealClock()),
		interval:     interval,
		period:       cmp.Or(max(opts.Period, 0), registry.DefaultMonitorPeriod),
		batch:        cmp.Or(max(opts.Batch, 0), DefaultSweepBatch),
		sweepTimeout: cmp.Or(max(opts.SweepTimeout, 0), max(interval, MinSweepTimeout)),
		trace:        opts.Trace,
		grace:        max(opts.Grace, 0),
		beforeSweep:  opts.BeforeSweep,
		unwritten:    opts.Unwritten,
	}
	m.logs = logsample.NewRepeated(m.clock.Now)
	m.blindAfter, m.onBlind = opts.BlindAfter, opts.OnBlind
	switch {
	case m.blindAfter == 0:
		m.blindAfter = DefaultBlindAfter(m.period, m.interval)
	case m.blindAfter < 0:
		m.blindAfter = 0
	}
	m.massLossShare, m.massLossMin, m.onMassLoss = opts.MassLossShare, opts.MassLossMin, opts.OnMassLoss
	m.massLossShare = cmp.Or(max(m.massLossShare, 0), DefaultMassLossShare)
	m.massLossMin = cmp.Or(max(m.massLossMin, 0), DefaultMassLossMin)
	return m
}

// errMonitorStarted: Start was called twice.
var errMonitorStarted = errors.New("monitor: already started")

// Start runs the monitor's loop in the background: a sweep at once and then
// every period, each bounded by the sweep timeout, until Stop. A failed
// sweep is logged, Healthy reports failures (two in a row) until a sweep
// succeeds, and the loop goes on. Sweeps use the store's own clock and
// ctx's values; only Stop ends the loop, not ctx. A monitor starts once.
func (m *Monitor) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done != nil {
		return errMonitorStarted
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stop, m.done, m.cancel = make(chan struct{}), make(chan struct{}), cancel
	ticker := m.clock.NewTicker(m.period)
	go func() {
		defer close(m.done)
		defer ticker.Stop()
		for {
			m.sweepOnce(ctx)
			select {
			case <-m.stop:
				return
			case <-ticker.Chan():
			}
		}
	}()
	return nil
}

// sweepOnce is one sweep of the loop, bounded by the sweep timeout.
func (m *Monitor) sweepOnce(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, m.sweepTimeout)
	defer cancel()
	_, err := m.Sweep(sctx, time.Time{})
	if errors.Is(err, context.Canceled) {
		return // stopped while sweeping: not a failure worth logging
	}
	var partial *registry.PartialError
	if errors.As(err, &partial) {
		// The tenants of a Citus worker that is down are as in an outage
		// (their own blind window covers them); the monitor serves the
		// others and stays healthy.
		m.logs.Warn(ctx, m.logger, logPartialSweep, "err", err,
			"tenants_failed", partial.Failed, "tenants", partial.Tenants)
		err = nil
	}
	m.mu.Lock()
	m.sweepErr = err
	if err != nil {
		m.failed++
	} else {
		m.failed = 0
	}
	m.mu.Unlock()
	if err != nil {
		m.logger.ErrorContext(ctx, "sweep failed", "err", err)
	}
}

// Stop ends the loop and waits for the sweep in flight to finish; when ctx
// ends first, that sweep is cancelled, and Stop waits for it to return and
// reports ctx's error. Stop is idempotent; a monitor never started stops at
// once.
func (m *Monitor) Stop(ctx context.Context) error {
	m.mu.Lock()
	if m.done == nil {
		m.mu.Unlock()
		return nil
	}
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	done, cancel := m.done, m.cancel
	m.mu.Unlock()
	defer cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		cancel()
		<-done
		return fmt.Errorf("sweep in flight: %w", ctx.Err())
	}
}

// Healthy is the loop's last sweep's error once that sweep and the one
// before it failed (unhealthyAfter), and nil otherwise: while sweeps
// succeed, before any has ended, after a single failure, and for a sweep
// that failed for some tenants only (registry.PartialError).
func (m *Monitor) Healthy() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed >= unhealthyAfter {
		return fmt.Errorf("monitor: last sweep failed: %w", m.sweepErr)
	}
	return nil
}

// Sweep is one pass over every tenant at now (zero: the store's clock). It
// returns every transition applied, each already audited and handed to the
// alert sink.
func (m *Monitor) Sweep(ctx context.Context, now time.Time) (all []registry.Event, err error) {
	start := m.clock.Now()
	if m.trace != nil {
		var end func([]registry.Event, error)
		ctx, end = m.trace(ctx)
		defer func() { end(all, err) }()
	}
	if m.beforeSweep != nil {
		// A flush that failed keeps its heartbeats held, and the sweep goes
		// on: the tenants it failed for are those whose store cannot write
		// (the database, or their Citus worker), which the sweep cannot
		// write either, while the others are swept.
		fctx, cancel := beforeSweepContext(ctx)
		err := m.beforeSweep(fctx)
		cancel()
		if err != nil {
			m.logs.Warn(ctx, m.logger, logFlushBeforeSweep, "err", err)
		}
	}
	// A tenant whose held heartbeats were answered and not written is not
	// swept: its stored heartbeat times are older than what its servers
	// were told. Its write may fail because its Citus worker hangs, and a
	// sweep's call to that worker would then run when it thaws, judging
	// the tenant's servers on those old times (a test of a hung worker,
	// 2026-12-07: a heartbeating server marked unhealthy at the thaw).
	// Only while a heartbeat kept could still keep a server from being
	// marked unhealthy: a tenant whose writes keep failing is swept in the
	// end, as its dead servers must move.
	var skip []uuid.UUID
	if m.unwritten != nil {
		skip = m.unwritten(registry.UnhealthyAfter(m.interval) + m.grace)
	}
	for range maxSweepBatches {
		var res store.SweepResult
		res, err = m.store.Sweep(ctx, store.SweepRequest{Now: now, Interval: m.interval, Limit: m.batch,
			BlindAfter: m.blindAfter, Grace: m.grace, Skip: skip})
		evs := res.Events
		if err == nil && res.Opened != nil {
			m.reportBlind(ctx, *res.Opened)
		}
		// A sweep that failed for some tenants (a Citus worker down) has
		// committed the others' transitions.
		for _, ev := range evs {
			m.sink.Transition(ctx, ev)
		}
		all = append(all, evs...)
		if err != nil {
			err = fmt.Errorf("sweep: %w", err)
			break
		}
		if len(evs) < m.batch {
			break
		}
	}
	// Even after a failure: the transitions applied before it are
	// committed, and a sweep runs out of its time most in a mass outage,
	// the check's very case.
	m.checkMassLoss(ctx, all)
	if m.observe != nil {
		m.observe(m.clock.Since(start), all, err)
	}
	return all, err
}

// beforeSweepShare is the share of a sweep's time that the write before
// it (BeforeSweep) may take: half of what is left. A write held up on one
// tenant (its Citus worker just back, its rows locked) used to take the
// whole of it, and every tenant's sweep then failed; the tenants it leaves
// unwritten are skipped (Unwritten), and the others are swept.
const beforeSweepShare = 2

// beforeSweepContext bounds BeforeSweep to its share of the time ctx has
// left; a ctx without a deadline bounds nothing.
func beforeSweepContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(deadline)/beforeSweepShare)
}

func (m *Monitor) reportBlind(ctx context.Context, w store.BlindWindow) {
	m.logger.WarnContext(ctx, "registry was blind: no server is moved away from healthy for that time",
		"blind_from", w.From, "blind_until", w.Until, "blind_seconds", w.Duration().Seconds())
	if m.onBlind != nil {
		m.onBlind(w)
	}
}

// massLossCheckTimeout bounds the mass-loss check's read: its own time,
// not what is left of the sweep's, which a long sweep may have spent.
const massLossCheckTimeout = 2 * time.Second

func (m *Monitor) checkMassLoss(ctx context.Context, events []registry.Event) {
	if len(events) < m.massLossMin {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), massLossCheckTimeout)
	defer cancel()
	losses, err := massLosses(cctx, m.store, events, m.massLossShare, m.massLossMin)
	if err != nil {
		m.logger.ErrorContext(ctx, "mass heartbeat loss check failed", "err", err)
		return
	}
	for _, l := range losses {
		m.logger.ErrorContext(ctx, "mass heartbeat loss: transitions applied", "alertname", "MCPRegistryMassHeartbeatLoss",
			"tenant_id", l.TenantID.String(), "unhealthy", l.Unhealthy, "live", l.Live)
		if m.onMassLoss != nil {
			m.onMassLoss(l)
		}
	}
}
