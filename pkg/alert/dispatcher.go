package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/cyberos/mcpd/pkg/backoff"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// Defaults of DispatcherOptions.
const (
	DefaultPollInterval   = time.Second
	DefaultResendInterval = time.Minute
	DefaultBatch          = 100
	DefaultBackoffMin     = 500 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
)

// tracerName names the tracer of the delivery spans.
const tracerName = "github.com/cyberos/mcpd/pkg/alert"

// holdFactor times the resend interval is how long Alertmanager holds a
// firing alert that is not sent again: two re-sends may be lost.
const holdFactor = 3

const (
	ackTimeout     = 5 * time.Second
	pendingTimeout = 2 * time.Second
	// defaultSlowSend is how long a send may take before the next ones stop
	// holding the claim while they wait.
	defaultSlowSend = time.Second
	// massLossQueue bounds the mass-loss alerts waiting for a destination.
	massLossQueue = 64
)

// DispatcherOptions configures a Dispatcher.
type DispatcherOptions struct {
	// Outbox is the store's alert outbox (required).
	Outbox store.AlertOutbox
	// SkillAlerts, when set, is the store's record of the skill outage
	// alerts (MCPSkillUnavailable) each destination fires; nil: no skill
	// outage alerts.
	SkillAlerts store.SkillAlerts
	// Destinations receive every alert; their names must be unique.
	Destinations []Destination
	Logger       *slog.Logger
	Clock        clockwork.Clock // nil: the real clock
	// PollInterval is how often an idle destination looks for new events.
	PollInterval time.Duration
	// ResendInterval is how often every firing alert is sent again to the
	// Resending destinations (Alertmanager), which hold one for three
	// intervals.
	ResendInterval time.Duration
	// Batch bounds the events claimed, and the alerts sent, at once.
	Batch int
	// BackoffMin and BackoffMax bound the wait after a failure, doubled at
	// each failure in a row, with jitter.
	BackoffMin, BackoffMax time.Duration
	// Registerer, when set, receives the dispatcher's metrics.
	Registerer prometheus.Registerer
	// Tracer gives each delivery attempt a span, whose traceparent the
	// request to the destination carries; nil is OpenTelemetry's no-op
	// provider: spans that record nothing.
	Tracer trace.TracerProvider

	// slowSend overrides defaultSlowSend when set (tests on a loaded machine).
	slowSend time.Duration
}

// Dispatcher delivers the alert outbox to its destinations, each in a
// goroutine of its own with its own cursor and backoff.
type Dispatcher struct {
	outbox     store.AlertOutbox
	skills     store.SkillAlerts
	logger     *slog.Logger
	clock      clockwork.Clock
	poll       time.Duration
	resend     time.Duration
	batch      int
	backoffMin time.Duration
	backoffMax time.Duration
	slowSend   time.Duration
	dests      []*destination
	tracer     trace.Tracer // no-op when tracing is off
	running    atomic.Bool
	// waiting, set by tests before Run, gets a destination's name each
	// time its loop has finished a round and waits on the clock: a test
	// on a fake clock advances it then, and never sleeps.
	waiting chan<- string
}

// destination is one Destination and the state of its loop; all but wake
// and the counters belong to the loop's goroutine.
type destination struct {
	Destination
	name      string
	resending bool
	wake      chan struct{}
	// skillCheck asks the next round to reconcile the skill outages: a
	// registration may have offered a skill whose outage fires.
	skillCheck atomic.Bool
	massLoss   chan Alert // raised by MassLoss, for a Resending destination
	sent       prometheus.Counter
	failed     prometheus.Counter

	round      int64
	failing    bool // the last round failed
	slow       bool // the last send took longer than slowSend
	lastResend time.Time
	// lastSkillCheck is when ds's firing skill alerts were last reconciled.
	lastSkillCheck time.Time
	// skillFiring is ds's firing skill alerts as last reconciled, at
	// skillFiringAt, and kept up with what rounds recorded since
	// (skillRound, keptOf).
	skillFiring   []store.SkillAlertState
	skillFiringAt time.Time
	// unhealthy is the store's list of unhealthy servers as fetched in
	// round fetched, at fetchedAt, for Resending destinations; unanswered
	// are the tenants that fetch had no answer for (fetchUnhealthy).
	unhealthy     []store.UnhealthyServer
	unhealthyByID map[uuid.UUID]store.UnhealthyServer
	fetched       int64
	fetchedAt     time.Time
	unanswered    map[uuid.UUID]bool
	// massPending are mass-loss alerts not yet delivered.
	massPending []Alert
}

// NewDispatcher returns a Dispatcher with opts, defaults filled in, its
// metrics registered on opts.Registerer.
func NewDispatcher(opts DispatcherOptions) (*Dispatcher, error) {
	if opts.Outbox == nil {
		return nil, errors.New("alert dispatcher: no outbox")
	}
	d := &Dispatcher{
		outbox: opts.Outbox, skills: opts.SkillAlerts, logger: opts.Logger, clock: opts.Clock, poll: opts.PollInterval,
		resend: opts.ResendInterval, batch: opts.Batch, backoffMin: opts.BackoffMin, backoffMax: opts.BackoffMax,
		slowSend: opts.slowSend,
	}
	if d.slowSend <= 0 {
		d.slowSend = defaultSlowSend
	}
	if d.logger == nil {
		d.logger = slog.New(slog.DiscardHandler)
	}
	tp := opts.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	d.tracer = tp.Tracer(tracerName)
	if d.clock == nil {
		d.clock = clockwork.NewRealClock()
	}
	if d.poll <= 0 {
		d.poll = DefaultPollInterval
	}
	if d.resend <= 0 {
		d.resend = DefaultResendInterval
	}
	if d.batch <= 0 {
		d.batch = DefaultBatch
	}
	if d.backoffMin <= 0 {
		d.backoffMin = DefaultBackoffMin
	}
	if d.backoffMax <= 0 {
		d.backoffMax = DefaultBackoffMax
	}
	d.backoffMax = max(d.backoffMax, d.backoffMin)

	sent := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpd_alerts_sent_total",
		Help: "Alerts a destination accepted, re-sends of firing alerts included.",
	}, []string{"destination"})
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpd_alerts_failed_total",
		Help: "Alerts in requests a destination did not accept; each retry counts again, refused (skipped) alerts included.",
	}, []string{"destination"})
	seen := make(map[string]bool, len(opts.Destinations))
	for _, dst := range opts.Destinations {
		if dst == nil {
			return nil, errors.New("alert dispatcher: nil destination")
		}
		name := dst.Name()
		if name == "" || seen[name] {
			return nil, fmt.Errorf("alert dispatcher: destination name %q empty or given twice", name)
		}
		seen[name] = true
		r, ok := dst.(Resending)
		d.dests = append(d.dests, &destination{
			Destination: dst, name: name, resending: ok && r.ResendsFiring(), wake: make(chan struct{}, 1),
			massLoss: make(chan Alert, massLossQueue),
			sent:     sent.WithLabelValues(name), failed: failed.WithLabelValues(name), fetched: -1,
		})
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{sent, failed, &pendingCollector{d: d}} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("alert dispatcher: register metrics: %w", err)
			}
		}
	}
	return d, nil
}

// Run delivers until ctx ends, then returns nil once every destination's
// loop has stopped. It never blocks the monitor or the API: they only
// write the outbox.
func (d *Dispatcher) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return errors.New("alert dispatcher: already running")
	}
	defer d.running.Store(false)
	if len(d.dests) == 0 {
		<-ctx.Done()
		return nil
	}
	var wg sync.WaitGroup
	for _, ds := range d.dests {
		wg.Go(func() { d.loop(ctx, ds) })
	}
	wg.Wait()
	return nil
}

// Transition wakes every idle destination for an event of an alert kind, so
// that it is sent before the next poll, and for a registration that offers
// skills, so that a skill outage it ends is resolved then rather than at
// the next resend interval; it never blocks. It fits lifecycle.TransitionSink,
// chained after the sink that logs.
func (d *Dispatcher) Transition(_ context.Context, ev registry.Event) {
	recheck := d.skills != nil && ev.Kind == registry.KindRegistered && len(ev.Body.SkillsAffected) > 0
	if !recheck && !registry.IsAlertEvent(ev.Kind, ev.FromStatus) {
		return
	}
	for _, ds := range d.dests {
		if recheck {
			ds.skillCheck.Store(true)
		}
		select {
		case ds.wake <- struct{}{}:
		default:
		}
	}
}

// MassLoss raises MCPRegistryMassHeartbeatLoss for a tenant at every
// Resending destination (Alertmanager), best effort: it is not in the
// outbox, so it is lost if mcpd stops before sending it, and it lapses by
// itself after three resend intervals. It never blocks; it fits
// lifecycle.MonitorOptions.OnMassLoss.
func (d *Dispatcher) MassLoss(l lifecycle.MassLoss) {
	now := d.clock.Now()
	a := Alert{Firing: true, TenantID: l.TenantID, StartsAt: now, EndsAt: now.Add(holdFactor * d.resend), MassLoss: &l}
	for _, ds := range d.dests {
		if !ds.resending {
			continue
		}
		select {
		case ds.massLoss <- a:
		default:
			d.logger.Warn("mass heartbeat loss alert dropped: queue full", "destination", ds.name,
				"tenant_id", l.TenantID.String())
			continue
		}
		select {
		case ds.wake <- struct{}{}:
		default:
		}
	}
}

// sendMassLosses sends ds's pending mass-loss alerts that have not lapsed.
func (d *Dispatcher) sendMassLosses(ctx context.Context, ds *destination) error {
	for more := true; more; {
		select {
		case a := <-ds.massLoss:
			ds.massPending = append(ds.massPending, a)
		default:
			more = false
		}
	}
	now := d.clock.Now()
	ds.massPending = slices.DeleteFunc(ds.massPending, func(a Alert) bool { return !a.EndsAt.After(now) })
	if len(ds.massPending) == 0 {
		return nil
	}
	n, err := d.send(ctx, ds, ds.massPending)
	ds.massPending = slices.Delete(ds.massPending, 0, n)
	if err != nil {
		return fmt.Errorf("send mass heartbeat loss alerts: %w", err)
	}
	return nil
}

// loop runs rounds for ds: at once while batches come back full, every poll
// interval when idle, after a growing backoff when a round fails.
func (d *Dispatcher) loop(ctx context.Context, ds *destination) {
	failures := 0
	for {
		more, err := d.round(ctx, ds)
		if ctx.Err() != nil {
			return
		}
		ds.failing = err != nil
		wait, wake := d.poll, ds.wake
		switch {
		case err != nil:
			failures++
			wait, wake = d.retryWait(failures), nil
			d.logger.WarnContext(ctx, "alert delivery failed", "destination", ds.name, "failures", failures,
				"retry_in", wait.Round(time.Millisecond).String(), "err", err)
		case failures > 0:
			d.logger.InfoContext(ctx, "alert delivery resumed", "destination", ds.name, "failures", failures)
			failures = 0
		}
		if err == nil && more {
			continue
		}
		timer := d.clock.NewTimer(wait)
		if d.waiting != nil {
			select {
			case d.waiting <- ds.name:
			default: // a test that stopped listening
			}
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.Chan():
		case <-wake:
			timer.Stop()
		}
	}
}

// retryWait is the wait after failures failures in a row: the backoff
// from BackoffMin doubled each time up to BackoffMax, then a random point
// in its upper half.
func (d *Dispatcher) retryWait(failures int) time.Duration {
	b := backoff.Exponential(d.backoffMin, d.backoffMax, failures)
	half := b / 2
	return half + rand.N(b-half+1)
}

// round claims ds's cursor, sends the events after it, re-sends firing
// alerts when that is due, raises and resolves the skill outages of the
// delivered events with the claim held (skillRound), and acknowledges
// what was delivered. more reports a full batch.
//
// A healthy destination is sent to while the claim is held, so that of
// several replicas one delivers each batch, and a re-send cannot overtake
// a resolution that another replica sends. A destination that failed or
// answered slowly last time is sent to with the claim given up meanwhile
// and taken again to acknowledge: a destination that hangs does not keep
// its claim (on PostgreSQL a lease on its cursor) through each retry, and
// a replica that reaches it may deliver meanwhile. Such a round may
// deliver what another replica delivers too: at least once.
func (d *Dispatcher) round(ctx context.Context, ds *destination) (more bool, err error) {
	ds.round++
	if ds.resending {
		if err := d.sendMassLosses(ctx, ds); err != nil {
			return false, err
		}
	}
	claim, err := d.outbox.ClaimAlerts(ctx, ds.name, d.batch)
	if err != nil {
		return false, fmt.Errorf("claim alerts: %w", err)
	}
	if claim == nil {
		// Another replica is delivering to ds, and may resolve what ds
		// last read: what ds keeps of tenants with no answer (keptOf) is
		// not to be resent once it claims again.
		ds.fetchedAt, ds.skillFiringAt = time.Time{}, time.Time{}
		return false, nil
	}
	events := claim.Events()
	alerts, eventOf, err := d.alertsFor(ctx, ds, events)
	if err != nil {
		claim.Release(ctx)
		return false, err
	}
	held := !ds.failing && !ds.slow
	if !held {
		claim.Release(ctx)
		d.logger.DebugContext(ctx, "alert destination sent to without its claim", "destination", ds.name,
			"failing", ds.failing, "slow", ds.slow, "events", len(events))
		if len(alerts) == 0 && !d.resendDue(ds) {
			return false, nil
		}
	}
	began := d.clock.Now()
	handled, sendErr := d.send(ctx, ds, alerts)
	ds.forgetResolved(alerts[:handled])
	delivered := len(events)
	if handled < len(alerts) {
		delivered = eventOf[handled]
	}
	if sendErr == nil && d.resendDue(ds) {
		sendErr = d.resendFiring(ctx, ds, alerts)
	}
	ds.slow = d.clock.Since(began) > d.slowSend

	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	n := delivered
	if !held {
		if delivered == 0 {
			return false, sendErr
		}
		if claim, err = d.outbox.ClaimAlerts(ackCtx, ds.name, d.batch); err != nil || claim == nil {
			// Another replica holds the cursor: it delivers these again.
			return false, errors.Join(sendErr, err)
		}
		n = deliveredPrefix(claim.Events(), events[:delivered])
	}
	if err := d.skillRound(ctx, ds, claim.Events()[:n]); err != nil {
		// The events wait for the next round, which sends again what
		// was not recorded: at least once.
		claim.Release(ctx)
		return false, errors.Join(sendErr, err)
	}
	if err := claim.Ack(ackCtx, n); err != nil {
		// What was sent will be sent again: at least once.
		return false, errors.Join(sendErr, fmt.Errorf("ack %d alert events: %w", n, err))
	}
	return held && sendErr == nil && len(events) == d.batch, sendErr
}

// deliveredPrefix is how many events at the front of claimed were among
// delivered: claimed starts at the cursor, which may have moved on into
// delivered (another replica) or past it.
func deliveredPrefix(claimed, delivered []registry.Event) int {
	if len(claimed) == 0 {
		return 0
	}
	j := slices.IndexFunc(delivered, func(e registry.Event) bool { return e.EventID == claimed[0].EventID })
	if j < 0 {
		return 0
	}
	n := 0
	for n < len(claimed) && j+n < len(delivered) && claimed[n].EventID == delivered[j+n].EventID {
		n++
	}
	return n
}

func (d *Dispatcher) resendDue(ds *destination) bool {
	return ds.resending && (ds.lastResend.IsZero() || d.clock.Since(ds.lastResend) >= d.resend)
}

// alertsFor turns the claimed events into alerts: unhealthy fires; a
// recovery, a deregistration or a registration again from unhealthy
// resolves; other events are passed. eventOf[i] is the position in events of alerts[i].
func (d *Dispatcher) alertsFor(ctx context.Context, ds *destination, events []registry.Event) ([]Alert, []int, error) {
	now := d.clock.Now()
	if ds.resending && ds.fetched != ds.round {
		for i := range events {
			if events[i].Kind.Spec().Alert == registry.AlertFires && !ds.stillUnhealthy(&events[i]) {
				if err := d.fetchUnhealthy(ctx, ds); err != nil {
					return nil, nil, err
				}
				break
			}
		}
	}
	var (
		alerts  []Alert
		eventOf []int
	)
	for i := range events {
		ev := &events[i]
		a := Alert{
			Event: ev, TenantID: ev.TenantID, ServerID: ev.ServerID, ModuleName: ev.ModuleName,
			Version: ev.Body.Version, TraceID: ev.TraceID,
		}
		spec := ev.Kind.Spec()
		switch {
		case spec.Alert == registry.AlertFires:
			a.Firing, a.StartsAt, a.EndsAt = true, ev.OccurredAt, now.Add(holdFactor*d.resend)
			if ds.resending {
				// A destination that holds firing alerts gets one only
				// while the server is still unhealthy since this event:
				// once over (resolved, or registered again), it would
				// fire for nothing until it lapsed.
				if !ds.stillUnhealthy(ev) {
					continue
				}
				a.LastHeartbeatAt = ds.unhealthyByID[ev.ServerID].LastHeartbeatAt
				ds.keepUnanswered(ev)
			}
		case spec.Alert != registry.AlertNone && ev.FromStatus != nil && *ev.FromStatus == registry.StatusUnhealthy:
			// A recovery, a deregistration or a registration again.
			a.EndsAt = ev.OccurredAt
			if spec.Heartbeat {
				a.LastHeartbeatAt = ev.OccurredAt
			}
		default:
			continue
		}
		alerts = append(alerts, a)
		eventOf = append(eventOf, i)
	}
	return alerts, eventOf, nil
}

// keptOf returns the entries of last, a read made at readAt, that keep
// takes: what a destination keeps of the tenants a read had no answer for
// (store.PartialReadError), while that read is younger than hold, the
// alerts' (before, they would have lapsed at the destination anyway).
func keptOf[T any](last []T, readAt, now time.Time, hold time.Duration, keep func(T) bool) []T {
	if readAt.IsZero() || now.Sub(readAt) >= hold {
		return nil
	}
	var out []T
	for _, v := range last {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// tenantSet is tenants as a set.
func tenantSet(tenants []uuid.UUID) map[uuid.UUID]bool {
	out := make(map[uuid.UUID]bool, len(tenants))
	for _, t := range tenants {
		out[t] = true
	}
	return out
}

// stillUnhealthy reports whether ds's list has ev's server unhealthy since
// ev, or, read in this round, has no answer for its tenant.
func (ds *destination) stillUnhealthy(ev *registry.Event) bool {
	u, ok := ds.unhealthyByID[ev.ServerID]
	return (ok && u.UnhealthySince.Equal(ev.OccurredAt)) || (ds.fetched == ds.round && ds.unanswered[ev.TenantID])
}

// keepUnanswered adds ev's server, which fires, to ds's list when its
// tenant had no answer (fetchUnhealthy), so that it is resent with the
// servers kept of that tenant.
func (ds *destination) keepUnanswered(ev *registry.Event) {
	if ds.fetched != ds.round || !ds.unanswered[ev.TenantID] {
		return
	}
	if u, ok := ds.unhealthyByID[ev.ServerID]; ok && !u.UnhealthySince.Before(ev.OccurredAt) {
		return
	}
	u := store.UnhealthyServer{ServerID: ev.ServerID, TenantID: ev.TenantID, ModuleName: ev.ModuleName,
		Version: ev.Body.Version, TraceID: ev.TraceID, UnhealthySince: ev.OccurredAt}
	ds.unhealthy = slices.DeleteFunc(ds.unhealthy, func(v store.UnhealthyServer) bool { return v.ServerID == ev.ServerID })
	ds.unhealthy = append(ds.unhealthy, u)
	ds.unhealthyByID[ev.ServerID] = u
}

// forgetResolved drops from ds's list the servers that resolved, of
// alerts: a list kept for tenants with no answer (fetchUnhealthy) must not
// fire them again.
func (ds *destination) forgetResolved(alerts []Alert) {
	for _, a := range alerts {
		if a.Firing || a.Event == nil {
			continue
		}
		if u, ok := ds.unhealthyByID[a.ServerID]; ok && u.UnhealthySince.Before(a.Event.OccurredAt) {
			delete(ds.unhealthyByID, a.ServerID)
			ds.unhealthy = slices.DeleteFunc(ds.unhealthy, func(v store.UnhealthyServer) bool { return v.ServerID == a.ServerID })
		}
	}
}

// fetchUnhealthy reads the unhealthy servers into ds. A read that had no
// answer for some tenants (on Citus, those of a worker that is down:
// store.PartialReadError) keeps their servers of the last list, when that
// list is younger than the alerts' hold: their firing alerts are resent
// and do not lapse while their events wait for the worker, and their
// claimed events fire (stillUnhealthy cannot tell).
func (d *Dispatcher) fetchUnhealthy(ctx context.Context, ds *destination) error {
	list, err := d.outbox.UnhealthyServers(ctx)
	var partial *store.PartialReadError
	switch {
	case errors.As(err, &partial):
		unanswered := tenantSet(partial.Unanswered)
		list = append(list, keptOf(ds.unhealthy, ds.fetchedAt, d.clock.Now(), holdFactor*d.resend,
			func(u store.UnhealthyServer) bool { return unanswered[u.TenantID] })...)
		ds.unanswered = unanswered
		d.logger.DebugContext(ctx, "unhealthy servers of some tenants not read", "destination", ds.name,
			"tenants", len(partial.Unanswered), "err", partial.Err)
	case err != nil:
		return fmt.Errorf("list unhealthy servers: %w", err)
	default:
		ds.unanswered = nil
	}
	ds.fetchedAt = d.clock.Now()
	ds.unhealthy = list
	ds.unhealthyByID = make(map[uuid.UUID]store.UnhealthyServer, len(list))
	for _, u := range list {
		ds.unhealthyByID[u.ServerID] = u
	}
	ds.fetched = ds.round
	return nil
}

// resendFiring sends every unhealthy server's firing alert to ds, but those
// that this round's events already fired.
func (d *Dispatcher) resendFiring(ctx context.Context, ds *destination, sent []Alert) error {
	if ds.fetched != ds.round {
		if err := d.fetchUnhealthy(ctx, ds); err != nil {
			return err
		}
	}
	fired := make(map[uuid.UUID]time.Time)
	for _, a := range sent {
		if a.Firing {
			fired[a.ServerID] = a.StartsAt
		}
	}
	now := d.clock.Now()
	var alerts []Alert
	for _, u := range ds.unhealthy {
		if at, ok := fired[u.ServerID]; ok && at.Equal(u.UnhealthySince) {
			continue
		}
		alerts = append(alerts, Alert{
			Firing: true, TenantID: u.TenantID, ServerID: u.ServerID, ModuleName: u.ModuleName, Version: u.Version,
			TraceID: u.TraceID, LastHeartbeatAt: u.LastHeartbeatAt, StartsAt: u.UnhealthySince,
			EndsAt: now.Add(holdFactor * d.resend),
		})
	}
	for start := 0; start < len(alerts); start += d.batch {
		chunk := alerts[start:min(start+d.batch, len(alerts))]
		if _, err := d.send(ctx, ds, chunk); err != nil {
			return fmt.Errorf("re-send firing alerts: %w", err)
		}
	}
	ds.lastResend = now
	return nil
}

// send delivers alerts to ds in order and returns how many were handled:
// accepted, or refused for good (logged and skipped, so that one poison
// event cannot block the queue). It stops at the first failure that a
// retry may cure.
func (d *Dispatcher) send(ctx context.Context, ds *destination, alerts []Alert) (int, error) {
	k := 0
	for k < len(alerts) {
		n, err := d.attempt(ctx, ds, alerts[k:])
		if err == nil {
			n = len(alerts) - k
		}
		n = min(max(n, 0), len(alerts)-k)
		ds.sent.Add(float64(n))
		k += n
		if err == nil {
			break
		}
		var de *DeliveryError
		count := 1
		if errors.As(err, &de) {
			count = max(de.Alerts, 1)
		}
		count = min(count, len(alerts)-k)
		ds.failed.Add(float64(count))
		if de == nil || !de.Permanent() {
			return k, err
		}
		args := []any{"destination", ds.name, "status", de.Status, "alerts", count, "err", de.Err}
		if ev := alerts[k].Event; ev != nil {
			args = append(args, "event_id", ev.EventID.String(), "server_id", ev.ServerID.String())
		}
		if sk := alerts[k].Skill; sk != nil {
			args = append(args, "event_id", sk.ID.String(), "tenant_id", alerts[k].TenantID.String(), "skill", sk.Skill)
		}
		d.logger.ErrorContext(ctx, "alert refused by destination, skipped", args...)
		k += count
	}
	return k, nil
}

// attempt is one delivery attempt of alerts to ds, in a span of its own
// when tracing is on.
func (d *Dispatcher) attempt(ctx context.Context, ds *destination, alerts []Alert) (int, error) {
	ctx, span := d.tracer.Start(ctx, "alert delivery", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	if !span.IsRecording() {
		return ds.Send(ctx, alerts)
	}
	firing := 0
	traceIDs := make([]string, 0, len(alerts))
	for _, al := range alerts {
		if al.Firing {
			firing++
		}
		if al.TraceID != "" {
			traceIDs = append(traceIDs, al.TraceID)
		}
	}
	span.SetAttributes(
		attribute.String("mcpd.alert.destination", ds.name),
		attribute.Int("mcpd.alert.count", len(alerts)),
		attribute.Int("mcpd.alert.firing", firing),
		attribute.StringSlice("mcpd.alert.trace_ids", traceIDs),
	)
	n, err := ds.Send(ctx, alerts)
	span.SetAttributes(attribute.Int("mcpd.alert.accepted", n))
	if err != nil {
		var de *DeliveryError
		if errors.As(err, &de) && de.Status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", de.Status))
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, "delivery failed")
	}
	return n, err
}

// pendingCollector reports, at each scrape, the age and number of each
// destination's undelivered alert events.
type pendingCollector struct{ d *Dispatcher }

var (
	oldestDesc = prometheus.NewDesc("mcpd_alerts_oldest_undelivered_seconds",
		"Age of the oldest alert event a destination has not yet acknowledged; 0 when none waits. "+
			"Counted from the store: every replica reports the same figure, so aggregate replicas with max, not sum.",
		[]string{"destination"}, nil)
	pendingDesc = prometheus.NewDesc("mcpd_alerts_pending",
		"Alert events a destination has not yet acknowledged. Counted from the store: every replica reports "+
			"the same figure, so aggregate replicas with max, not sum.", []string{"destination"}, nil)
)

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- oldestDesc
	ch <- pendingDesc
}

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), pendingTimeout)
	defer cancel()
	for _, ds := range c.d.dests {
		n, oldest, err := c.d.outbox.PendingAlerts(ctx, ds.name)
		if err != nil {
			c.d.logger.Warn("count undelivered alerts", "destination", ds.name, "err", err)
			continue
		}
		age := 0.0
		if !oldest.IsZero() {
			age = max(c.d.clock.Since(oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, ds.name)
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n), ds.name)
	}
}
