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
	for range maxSweepBatches {
		var evs []Event
		evs, err = m.store.Sweep(ctx, now, m.interval, m.batch)
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
	if m.observe != nil {
		m.observe(m.clock.Since(start), all, err)
	}
	return all, err
}
