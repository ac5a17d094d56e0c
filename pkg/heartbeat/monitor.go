package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
)

// DefaultSweepBatch bounds the transitions one sweep statement applies; a
// sweep repeats until a batch comes back short, at most maxSweepBatches
// times, and the next tick goes on from there.
const DefaultSweepBatch = 1000

const maxSweepBatches = 100

// Monitor is the health monitor: every period it sweeps all tenants and
// moves servers that stopped heartbeating to degraded and unhealthy.
type Monitor struct {
	store    Store
	sink     AlertSink
	logger   *slog.Logger
	clock    clockwork.Clock
	interval time.Duration
	period   time.Duration
	batch    int
	observe  func(d time.Duration, transitions []Event, err error)

	blindAfter    time.Duration
	onBlind       func(BlindWindow)
	massLossShare float64
	massLossMin   int
	onMassLoss    func(MassLoss)
}

// MonitorOptions configures a Monitor.
type MonitorOptions struct {
	Store             Store
	Sink              AlertSink
	Logger            *slog.Logger
	Clock             clockwork.Clock // nil: the real clock
	HeartbeatInterval time.Duration
	Period            time.Duration
	Batch             int
	// Observe, when set, is called after every sweep (for metrics).
	Observe func(d time.Duration, transitions []Event, err error)

	// BlindAfter turns on blind-window protection when the store supports
	// it (GuardedSweeper): a gap longer than this between successful sweeps
	// means the registry was blind. Zero: DefaultBlindAfter; negative: off.
	BlindAfter time.Duration
	// OnBlind is called once per blind window, when sight returns.
	OnBlind func(BlindWindow)
	// MassLossShare and MassLossMin set the mass-heartbeat-loss check: more
	// than this share of a tenant's live servers, and at least this many,
	// going unhealthy in one sweep (defaults 0.5 and 10). The transitions
	// are still applied.
	MassLossShare float64
	MassLossMin   int
	// OnMassLoss is called for each tenant with a mass heartbeat loss, when
	// the store can count live servers (LiveCounter).
	OnMassLoss func(MassLoss)
}

// DefaultBlindAfter is the gap between successful sweeps that counts as a
// blind registry: two monitor periods, and at least one heartbeat interval.
func DefaultBlindAfter(period, interval time.Duration) time.Duration {
	return max(2*period, interval)
}

// NewMonitor returns a Monitor with opts, defaults filled in.
func NewMonitor(opts MonitorOptions) *Monitor {
	m := &Monitor{store: opts.Store, sink: opts.Sink, logger: opts.Logger, clock: opts.Clock,
		interval: opts.HeartbeatInterval, period: opts.Period, batch: opts.Batch, observe: opts.Observe}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	if m.sink == nil {
		m.sink = LogSink{Logger: m.logger}
	}
	if m.clock == nil {
		m.clock = clockwork.NewRealClock()
	}
	if m.interval <= 0 {
		m.interval = DefaultHeartbeatInterval
	}
	if m.period <= 0 {
		m.period = DefaultMonitorPeriod
	}
	if m.batch <= 0 {
		m.batch = DefaultSweepBatch
	}
	m.blindAfter, m.onBlind = opts.BlindAfter, opts.OnBlind
	switch {
	case m.blindAfter == 0:
		m.blindAfter = DefaultBlindAfter(m.period, m.interval)
	case m.blindAfter < 0:
		m.blindAfter = 0
	}
	m.massLossShare, m.massLossMin, m.onMassLoss = opts.MassLossShare, opts.MassLossMin, opts.OnMassLoss
	if m.massLossShare <= 0 {
		m.massLossShare = DefaultMassLossShare
	}
	if m.massLossMin <= 0 {
		m.massLossMin = DefaultMassLossMin
	}
	return m
}

// Run sweeps at once and then every period until ctx ends. A failed sweep
// is logged and the loop goes on. The sweep's now is the store's own clock.
func (m *Monitor) Run(ctx context.Context) error {
	ticker := m.clock.NewTicker(m.period)
	defer ticker.Stop()
	for {
		if _, err := m.Sweep(ctx, time.Time{}); err != nil && !errors.Is(err, context.Canceled) {
			m.logger.ErrorContext(ctx, "sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.Chan():
		}
	}
}

// Sweep is one pass over every tenant at now (zero: the store's clock). It
// returns every transition applied, each already audited and handed to the
// alert sink.
func (m *Monitor) Sweep(ctx context.Context, now time.Time) ([]Event, error) {
	start := m.clock.Now()
	var all []Event
	var err error
	guarded, _ := m.store.(GuardedSweeper)
	if m.blindAfter <= 0 {
		guarded = nil
	}
	for range maxSweepBatches {
		var evs []Event
		if guarded != nil {
			var res SweepResult
			res, err = guarded.SweepGuarded(ctx, SweepRequest{Now: now, Interval: m.interval, Limit: m.batch, BlindAfter: m.blindAfter})
			evs = res.Events
			if err == nil && res.Opened != nil {
				m.reportBlind(ctx, *res.Opened)
			}
		} else {
			evs, err = m.store.Sweep(ctx, now, m.interval, m.batch)
		}
		if err != nil {
			err = fmt.Errorf("sweep: %w", err)
			break
		}
		for _, ev := range evs {
			m.sink.Transition(ctx, ev)
		}
		all = append(all, evs...)
		if len(evs) < m.batch {
			break
		}
	}
	if err == nil {
		m.checkMassLoss(ctx, all)
	}
	if m.observe != nil {
		m.observe(m.clock.Since(start), all, err)
	}
	return all, err
}

func (m *Monitor) reportBlind(ctx context.Context, w BlindWindow) {
	m.logger.WarnContext(ctx, "registry was blind: no server is moved away from healthy for that time",
		"blind_from", w.From, "blind_until", w.Until, "blind_seconds", w.Duration().Seconds())
	if m.onBlind != nil {
		m.onBlind(w)
	}
}

func (m *Monitor) checkMassLoss(ctx context.Context, events []Event) {
	counter, ok := m.store.(LiveCounter)
	if !ok || len(events) < m.massLossMin {
		return
	}
	losses, err := massLosses(ctx, counter, events, m.massLossShare, m.massLossMin)
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
