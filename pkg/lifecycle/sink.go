package lifecycle

import (
	"context"
	"log/slog"

	"github.com/cyberos/mcpd/pkg/registry"
)

// TransitionSink receives every transition as it commits: the Registrar's
// and the Monitor's, for the feed hub, the alert dispatcher, the metrics
// and the log. It must not block: the monitor and the heartbeat path do
// not wait on delivery.
type TransitionSink interface {
	Transition(ctx context.Context, ev registry.Event)
}

// LogSink is a TransitionSink that logs each transition.
type LogSink struct{ Logger *slog.Logger }

// Transition logs ev at warn level for unhealthy, info otherwise.
func (s LogSink) Transition(ctx context.Context, ev registry.Event) {
	level := slog.LevelInfo
	if ev.Kind == registry.KindUnhealthy {
		level = slog.LevelWarn
	}
	from := ""
	if ev.FromStatus != nil {
		from = string(*ev.FromStatus)
	}
	s.Logger.Log(ctx, level, "server transition",
		"kind", string(ev.Kind), "tenant_id", ev.TenantID.String(), "server_id", ev.ServerID.String(),
		"module_name", ev.ModuleName, "from_status", from, "to_status", string(ev.ToStatus),
		"trace_id", ev.TraceID)
}
