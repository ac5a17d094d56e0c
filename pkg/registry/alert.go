package registry

import (
	"context"
	"log/slog"
)

// AlertSink receives every transition as it commits. It must not block: the
// monitor and the heartbeat path do not wait on delivery.
type AlertSink interface {
	Transition(ctx context.Context, ev Event)
}

// LogSink is an AlertSink that logs each transition.
type LogSink struct{ Logger *slog.Logger }

// Transition logs ev at warn level for unhealthy, info otherwise.
func (s LogSink) Transition(ctx context.Context, ev Event) {
	level := slog.LevelInfo
	if ev.Kind == KindUnhealthy {
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
