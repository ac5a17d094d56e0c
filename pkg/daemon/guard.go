package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/store"
)

// guardMetrics counts what the monitor's safeguards saw: blind windows and
// mass heartbeat losses.
type guardMetrics struct {
	blindWindows *prometheus.CounterVec
	blindSeconds prometheus.Counter
	massLosses   *prometheus.CounterVec
	onMassLoss   func(lifecycle.MassLoss)
}

func newGuardMetrics(reg prometheus.Registerer) *guardMetrics {
	g := &guardMetrics{
		blindWindows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_blind_windows_total",
			Help: "Blind windows found: gaps between successful sweeps during which no server was moved away from healthy.",
		}, nil),
		blindSeconds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_blind_seconds_total",
			Help: "Total length of the blind windows found.",
		}),
		massLosses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_mass_heartbeat_loss_total",
			Help: "Sweeps in which more than the set share of a tenant's live servers went unhealthy (MCPRegistryMassHeartbeatLoss).",
		}, []string{"tenant_id"}),
	}
	reg.MustRegister(g.blindWindows, g.blindSeconds, g.massLosses)
	g.blindWindows.WithLabelValues()
	return g
}

func (g *guardMetrics) blind(w store.BlindWindow) {
	g.blindWindows.WithLabelValues().Inc()
	g.blindSeconds.Add(w.Duration().Seconds())
}

func (g *guardMetrics) massLoss(l lifecycle.MassLoss) {
	g.massLosses.WithLabelValues(l.TenantID.String()).Inc()
	if g.onMassLoss != nil {
		g.onMassLoss(l)
	}
}
