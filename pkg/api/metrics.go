package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Results of a heartbeat, the values of mcpd_heartbeats_total's label.
const (
	HeartbeatOK           = "ok"
	HeartbeatNotFound     = "not_found"
	HeartbeatDeregistered = "deregistered"
	HeartbeatError        = "error"
)

// Reasons a call is refused by a tenant limit, the values of
// mcpd_limit_refusals_total's label.
const (
	RefusedQuota   = "quota"
	RefusedRate    = "rate"
	RefusedWatches = "watches"
)

// countTimeout bounds the status count a scrape asks the store for.
const countTimeout = 2 * time.Second

// Metrics is mcpd's Prometheus instrumentation on a private registry: the
// HTTP API, heartbeats, transitions, sweeps, store errors, servers per status
// (counted on scrape), and the Go and process collectors.
type Metrics struct {
	registry    *prometheus.Registry
	heartbeats  *prometheus.CounterVec
	transitions *prometheus.CounterVec
	sweeps      prometheus.Histogram
	sweepFails  prometheus.Counter
	requests    *prometheus.HistogramVec
	storeErrors prometheus.Counter
	// The change feed: open watch streams, streams cut (a client too slow
	// or gone), and the hub's reads of the store.
	watchers     prometheus.Gauge
	watchCutoffs prometheus.Counter
	feedReads    *prometheus.CounterVec
	feedEvents   prometheus.Counter
	refusals     *prometheus.CounterVec
	// Held heartbeats: the flushes' store calls, the heartbeats written,
	// how long the oldest waited, and those a failed flush had to drop.
	heldWrites  *prometheus.CounterVec
	heldBeats   prometheus.Counter
	heldLag     prometheus.Histogram
	heldDropped prometheus.Counter
}

// MetricsOptions configures NewMetrics.
type MetricsOptions struct {
	// Registry receives every collector; nil: a new private registry.
	Registry *prometheus.Registry
	// Counter, when set, backs mcpd_servers{status} at every scrape.
	Counter store.StatusCounter
	// Logger reports a failed status count.
	Logger *slog.Logger
}

// NewMetrics registers mcpd's collectors on opts.Registry.
func NewMetrics(opts MetricsOptions) *Metrics {
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		registry: reg,
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_heartbeats_total",
			Help: "Heartbeats received, by result (ok, not_found, deregistered, error).",
		}, []string{"result"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_transitions_total",
			Help: "Status transitions applied, by from and to status (from is empty for a new server).",
		}, []string{"from", "to"}),
		sweeps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcpd_sweep_duration_seconds",
			Help:    "Duration of one monitor sweep over every tenant.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		sweepFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_sweep_failures_total",
			Help: "Monitor sweeps that failed (the store did not answer or refused); the next sweep tries again.",
		}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpd_http_request_duration_seconds",
			Help:    "Duration of HTTP requests, by route pattern and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "code"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_store_errors_total",
			Help: "Store calls that failed for a reason other than the caller's input.",
		}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpd_watch_streams",
			Help: "Open GET /v1/mcp/watch streams.",
		}),
		watchCutoffs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_watch_stream_cutoffs_total",
			Help: "Watch streams ended by a failed write: a client that did not read in time, or went away.",
		}),
		feedReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_feed_reads_total",
			Help: "Reads of every tenant's new events by the change feed (one per poll per process), by result.",
		}, []string{"result"}),
		feedEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_feed_events_total",
			Help: "Events the change feed read from the store.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_limit_refusals_total",
			Help: "Calls refused by a tenant limit, by reason (quota, rate, watches).",
		}, []string{"reason"}),
		heldWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_heartbeat_flush_writes_total",
			Help: "Store calls that wrote held heartbeats (one per tenant per flush window), by result (ok, error).",
		}, []string{"result"}),
		heldBeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_heartbeat_flush_heartbeats_total",
			Help: "Heartbeats answered from memory and then written by a flush (the latest per server per window).",
		}),
		heldLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcpd_heartbeat_flush_lag_seconds",
			Help:    "Per flush, how long the oldest heartbeat it wrote had been held when its write committed.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, .75, 1, 2.5, 5},
		}),
		heldDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_heartbeat_flush_dropped_total",
			Help: "Held heartbeats that failed to write and could not be kept for the next flush (the bound on unwritten heartbeats).",
		}),
	}
	for _, r := range []string{RefusedQuota, RefusedRate, RefusedWatches} {
		m.refusals.WithLabelValues(r)
	}
	for _, r := range []string{HeartbeatOK, HeartbeatNotFound, HeartbeatDeregistered, HeartbeatError} {
		m.heartbeats.WithLabelValues(r)
	}
	m.feedReads.WithLabelValues("ok")
	m.feedReads.WithLabelValues("error")
	m.heldWrites.WithLabelValues("ok")
	m.heldWrites.WithLabelValues("error")
	reg.MustRegister(m.heartbeats, m.transitions, m.sweeps, m.sweepFails, m.requests, m.storeErrors, m.refusals,
		m.watchers, m.watchCutoffs, m.feedReads, m.feedEvents, m.heldWrites, m.heldBeats, m.heldLag, m.heldDropped,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if opts.Counter != nil {
		reg.MustRegister(&statusCollector{counter: opts.Counter, logger: logger, errors: m.storeErrors})
	}
	return m
}

// ObserveFeedRead counts a read of the change feed: the events it returned
// and whether it failed. It fits feed.Options.OnPoll.
func (m *Metrics) ObserveFeedRead(events int, err error) {
	if err != nil {
		m.feedReads.WithLabelValues("error").Inc()
		return
	}
	m.feedReads.WithLabelValues("ok").Inc()
	m.feedEvents.Add(float64(events))
}

// ObserveHeldFlush counts a flush of held heartbeats; it fits
// lifecycle.RegistrarOptions.OnFlush.
func (m *Metrics) ObserveHeldFlush(st lifecycle.FlushStats) {
	m.heldWrites.WithLabelValues("ok").Add(float64(st.Calls - st.Failed))
	m.heldWrites.WithLabelValues("error").Add(float64(st.Failed))
	m.heldBeats.Add(float64(st.Heartbeats))
	m.heldDropped.Add(float64(st.Dropped))
	if st.Heartbeats > 0 {
		m.heldLag.Observe(st.Lag.Seconds())
	}
}

// Registry returns the registry the metrics are on.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Sink returns a TransitionSink that counts each transition and hands it on to
// next.
func (m *Metrics) Sink(next lifecycle.TransitionSink) lifecycle.TransitionSink {
	return countingSink{m: m, next: next}
}

// ObserveSweep records one sweep; it fits lifecycle.MonitorOptions.Observe.
// The sweep's transitions are counted by the sink, not here.
func (m *Metrics) ObserveSweep(d time.Duration, _ []registry.Event, err error) {
	m.sweeps.Observe(d.Seconds())
	if err != nil {
		m.sweepFails.Inc()
		m.storeErrors.Inc()
	}
}

func (m *Metrics) refused(reason string) {
	m.refusals.WithLabelValues(reason).Inc()
}

func (m *Metrics) observeHeartbeat(result string) {
	m.heartbeats.WithLabelValues(result).Inc()
}

type countingSink struct {
	m    *Metrics
	next lifecycle.TransitionSink
}

func (s countingSink) Transition(ctx context.Context, ev registry.Event) {
	from := ""
	if ev.FromStatus != nil {
		from = string(*ev.FromStatus)
	}
	s.m.transitions.WithLabelValues(from, string(ev.ToStatus)).Inc()
	if s.next != nil {
		s.next.Transition(ctx, ev)
	}
}

// statusCollector reports mcpd_servers{status} from the store at each
// scrape; on a failed count it reports nothing, so that a gap shows.
type statusCollector struct {
	counter store.StatusCounter
	logger  *slog.Logger
	errors  prometheus.Counter
}

var serversDesc = prometheus.NewDesc("mcpd_servers",
	"Registered servers across every tenant, by status, as the store counts them: every replica reports the same "+
		"figures, so aggregate replicas with max, not sum.", []string{"status"}, nil)

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- serversDesc }

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countTimeout)
	defer cancel()
	counts, err := c.counter.CountByStatus(ctx)
	if err != nil {
		c.errors.Inc()
		c.logger.Warn("count servers by status", "err", err)
		return
	}
	for _, st := range registry.Statuses {
		ch <- prometheus.MustNewConstMetric(serversDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}
