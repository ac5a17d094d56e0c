package daemon

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/cyberos/mcpd/pkg/alert"
	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

// newDispatcher returns the alert dispatcher for the configured
// destinations, or nil when none is configured.
func (d *Daemon) newDispatcher(outbox store.Backend, reg prometheus.Registerer, tp trace.TracerProvider) (*alert.Dispatcher, error) {
	if len(d.cfg.AlertmanagerURLs) == 0 && d.cfg.AlertWebhookURL == "" {
		return nil, nil
	}
	dests, err := alert.NewDestinations(d.cfg.AlertmanagerURLs, d.cfg.AlertWebhookURL, d.cfg.AlertWebhookSecretFile, nil)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	disp, err := alert.NewDispatcher(alert.DispatcherOptions{Outbox: outbox, SkillAlerts: outbox, Destinations: dests, Logger: d.logger,
		Clock: d.clock, Registerer: reg, Tracer: tp})
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	return disp, nil
}

// alertWaker passes each transition on and wakes the dispatcher, so that an
// alert leaves at once instead of at the next poll.
type alertWaker struct {
	next       lifecycle.TransitionSink
	dispatcher *alert.Dispatcher
}

func (w alertWaker) Transition(ctx context.Context, ev registry.Event) {
	w.next.Transition(ctx, ev)
	w.dispatcher.Transition(ctx, ev)
}
